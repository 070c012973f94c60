"""The KV ledger (`[kv_cache.accounting]`): who holds which pages, and the orphan check.

Per request: pages, tenant, state, last access, rebuild cost. Per session: pages, tenant, last
access, rebuildable, rebuild cost. Per tenant: live blocks, share, reservations, retained blocks,
GPU time. The admin API serves `ledger(core)` as JSON.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reference_engine.core.engine import EngineCore


def ledger(core: EngineCore, max_rows: int = 1000) -> dict:
    pool, sched = core.pool, core.scheduler
    snap = core.snapshot()
    requests = [
        {
            "request_id": r.request_id,
            "tenant": r.tenant,
            "traffic_class": r.traffic_class.value,
            "state": r.state.value,
            "pages": len(r.block_ids),
            "tokens": r.num_tokens,
            "kv_tokens": r.num_kv_tokens,
            "last_access_s": r.last_step_s,
            "session_id": r.session_id,
            "preemptions": r.num_preemptions,
            "approximate": r.approximate,
            "rebuild_cost_s": core.executor.prefill_time_s(r.num_tokens),
        }
        for r in list(sched.requests.values())[:max_rows]
    ]
    sessions = [
        {
            "session_id": s.session_id,
            "tenant": s.tenant.name,
            "state": s.state.value,
            "pages": len(s.blocks),
            "tokens": s.num_tokens,
            "last_access_s": s.last_access_s,
            "rebuildable": s.rebuildable,
            "rebuild_cost_s": s.rebuild_cost_s,
            "turns": s.turns,
            "rebuilds": s.rebuilds,
        }
        for s in list(core.sessions)[-max_rows:]
    ]
    tenants = [
        {
            "tenant": t.name,
            "traffic_class": t.traffic_class.value,
            "live_blocks": pool.live_by_tenant.get(t.name, 0),
            "share": snap.tenant_share(t.name),
            "max_share": t.config.max_kv_share,
            "reserved_blocks": t.reserved_blocks,
            "reserved_tokens": t.reserved_tokens,
            "retained_blocks": t.retained_blocks,
            "active_seqs": t.active_seqs,
            "gpu_time_s": t.gpu_time_s,
            "requests": t.num_requests,
            "rejected": dict(t.num_rejected),
        }
        for t in core.tenants
    ]
    return {
        "t_s": snap.t_s,
        "config_digest": core.digest,
        "pool": {
            "num_blocks": pool.num_blocks,
            "block_tokens": pool.block_tokens,
            "live": snap.live_blocks,
            "retained": snap.retained_blocks,
            "pinned": snap.pinned_blocks,
            "cached": snap.cached_blocks,
            "free": snap.free_blocks,
            "usage": snap.usage,
            "fragmentation": snap.fragmentation,
            "level": snap.level,
        },
        "requests": requests,
        "sessions": sessions,
        "tenants": tenants,
    }


def reconcile_orphans(core: EngineCore) -> int:
    """Release request references that no request owns. O(blocks).

    A block's references are its holds (sessions, pins), one per request whose block table lists
    it and one per outside reference (a P/D pair's source or reservation); any reference beyond
    that is an orphan left by a bug or a lost worker."""
    pool, sched = core.pool, core.scheduler
    expected_refs: Counter[int] = Counter()
    for r in sched.requests.values():
        expected_refs.update(r.block_ids)
    expected_refs.update(core.outside_refs())
    now = core.clock.now()
    freed = 0
    for b in pool.blocks_with_request_refs():  # a block with no request reference has no orphan
        extra_refs = pool.ref_count(b) - pool.hold_count(b) - expected_refs.get(b, 0)
        if extra_refs > 0:
            pool.decref([b] * extra_refs, now)
            freed += extra_refs
    return freed
