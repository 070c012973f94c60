"""A point-in-time view of KV usage and queues: what samples, metrics and the admin API show.

Live blocks include retained ones (idle sessions, pins); cached blocks (refcount 0, reusable
prefixes) are on their own line and are *not* usage, as in vLLM.

`PolicyStats` are the cumulative counters that compare eviction policies under one load
(docs/policies.md): evictions by reason, prefix hit rate, re-prefill and approximated tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from record.events import EventKind
from reference_engine.config import TrafficClass

if TYPE_CHECKING:
    from reference_engine.core.engine import EngineCore


@dataclass(frozen=True, slots=True)
class UsageSnapshot:
    t_s: float
    num_blocks: int
    live_blocks: int
    retained_blocks: int
    pinned_blocks: int
    cached_blocks: int
    free_blocks: int
    pending_blocks: int
    num_running: int
    num_waiting: int
    num_swapped: int
    num_prefilling: int
    waiting_by_class: dict[str, int]
    oldest_wait_s_by_class: dict[str, float]
    tenant_live_blocks: dict[str, int]
    public_live_blocks: int
    fragmentation: float  # tail waste of running requests over their block capacity
    compacted_blocks: int  # held by running requests a token-level policy dropped KV of (zones: the window zone)
    level: str
    host_used_bytes: float
    tier_used_blocks: dict[str, int]  # blocks each KV tier below the pool holds ({} without tiers)

    @property
    def usage(self) -> float:
        return self.live_blocks / self.num_blocks

    @property
    def active_blocks(self) -> int:
        return self.live_blocks - self.retained_blocks

    def tenant_share(self, tenant: str) -> float:
        return self.tenant_live_blocks.get(tenant, 0) / self.num_blocks


def take_snapshot(core: EngineCore, now_s: float | None = None) -> UsageSnapshot:
    """The engine as it is, stamped `now_s` (default: the clock's now): the end of the steps
    just applied, before the caller's clock moves there."""
    pool, sched = core.pool, core.scheduler
    now = core.clock.now() if now_s is None else now_s
    bt = pool.block_tokens
    waste = cap = compacted = 0
    for r in sched.running.values():
        cap += len(r.block_ids) * bt
        waste += len(r.block_ids) * bt - r.num_kv_tokens
        if r.num_dropped_tokens:
            compacted += len(r.block_ids)
    live, cached, free = pool.num_live, pool.num_cached, pool.num_free
    by_tenant = pool.live_by_tenant
    oldest: dict[str, float] = {c.value: 0.0 for c in TrafficClass}
    for r in sched.waiting:
        c = r.traffic_class.value
        oldest[c] = max(oldest[c], now - r.arrival_s)
    return UsageSnapshot(
        t_s=now,
        num_blocks=pool.num_blocks,
        live_blocks=live,
        retained_blocks=pool.num_retained,
        pinned_blocks=sched.num_pinned_blocks,
        cached_blocks=cached,
        free_blocks=free,
        pending_blocks=sched.pending_blocks,
        num_running=len(sched.running),
        num_waiting=len(sched.waiting),
        num_swapped=len(sched.swapped),
        num_prefilling=len(sched.prefilling),
        waiting_by_class={c.value: n for c, n in sched.waiting.num_by_class.items()},
        oldest_wait_s_by_class=oldest,
        tenant_live_blocks={t: n for t, n in by_tenant.items() if t is not None},
        public_live_blocks=by_tenant.get(None, 0),
        fragmentation=waste / cap if cap else 0.0,
        compacted_blocks=compacted,
        level=core.marks.level(live).name.lower(),
        host_used_bytes=core.host.used_bytes,
        tier_used_blocks=core.tiers.usage() if core.tiers is not None else {},
    )


@dataclass(frozen=True, slots=True)
class PolicyStats:
    """Cumulative since engine start; every field is a plain number, ready for metrics and records."""

    policy: str
    approximate: bool
    evicted_sessions: dict[str, int]  # idle sessions evicted, by reason (`evicted` events)
    evicted_session_blocks: dict[str, int]  # blocks they held, by reason
    expired_sessions: int  # idle timeouts (`expired` events)
    evicted_cached_blocks: int  # refcount-0 prefix blocks reused for new data
    prefix_query_blocks: int
    prefix_hit_blocks: int
    recompute_tokens: int  # discarded by recompute preemptions, computed again on resume
    computed_tokens: int  # computed by every step (prefill, decode, recompute): the tax's denominator
    approximated_tokens: int  # KV tokens dropped by a token-level policy (`approximated` events)
    buffer_evicted_blocks: int  # cached blocks evicted ahead of demand to keep a free buffer (zones)
    num_oom: int

    @property
    def prefix_hit_rate(self) -> float:
        return self.prefix_hit_blocks / self.prefix_query_blocks if self.prefix_query_blocks else 0.0


def take_policy_stats(core: EngineCore) -> PolicyStats:
    pool, sched = core.pool, core.scheduler
    return PolicyStats(
        policy=core.policy.name,
        approximate=core.policy.approximate,
        evicted_sessions=dict(sched.num_evicted_sessions),
        evicted_session_blocks=dict(sched.num_evicted_session_blocks),
        expired_sessions=core.events.counts[EventKind.EXPIRED],
        evicted_cached_blocks=pool.num_evicted_cached,
        prefix_query_blocks=pool.num_prefix_queries,
        prefix_hit_blocks=pool.num_prefix_hits,
        recompute_tokens=sched.recompute_tokens,
        computed_tokens=core.num_computed_tokens,
        approximated_tokens=sched.approximated_tokens,
        buffer_evicted_blocks=sched.num_buffer_evicted_blocks,
        num_oom=sched.num_oom,
    )
