"""Prometheus metrics of one engine, in a `CollectorRegistry` of its own (never the global one,
so two apps in one process, as in tests, do not collide).

Two sources, both one-way:
- **counters and histograms** are derived from the core's event log, which the engine loop
  hands over by cursor after every step (`on_events`); nothing is patched into the core;
- **gauges** (blocks, usage, queues, tenants) and the core's own running totals are read
  from a `snapshot()` when Prometheus scrapes (`StateCollector`).

Where a metric means what vLLM's does it is also exported under vLLM's name and meaning:
`vllm:kv_cache_usage_perc` (a fraction, 0..1, of *live* blocks), `vllm:num_requests_running`,
`vllm:num_requests_waiting`, `vllm:num_preemptions_total`, `vllm:prefix_cache_queries_total`
and `vllm:prefix_cache_hits_total` (in tokens), `vllm:time_to_first_token_seconds`, and the pool
as `vllm:cache_config_info{block_size, num_gpu_blocks}`.
docs/server.md lists every metric. Families labelled by tenant are served only to a caller
with the admin key or `server.metrics_key` (`render(with_tenants=...)`): tenant names are not
for anonymous readers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from record.events import Event, EventKind
from reference_engine.core.engine import EngineCore
from reference_engine.core.tiers import TieredCache
from reference_engine.executors.base import Tier

# vLLM's TTFT buckets, so dashboards built for vLLM read ours the same way.
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
RELEASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
TENANT_LABEL = "tenant"
LAG_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class EngineMetrics:
    """Owns `registry`; `on_events` / `on_step` are called by the engine loop only."""

    def __init__(self, core: EngineCore, model_name: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # process_start_time_seconds, as vLLM's Python registry exports it: a worker killed and
        # started again on its port shows from outside as a new start time (kvgate's restart watch).
        ProcessCollector(registry=r)
        self.admissions = Counter(
            "kvgate_admissions",
            "Requests admitted or queued, by outcome",
            ["tenant", "traffic_class", "outcome"],
            registry=r,
        )
        self.rejections = Counter("kvgate_rejections", "Requests refused, by reason", ["tenant", "reason"], registry=r)
        self.rejected_tokens = Counter(
            "kvgate_rejected_tokens", "Prompt tokens of refused requests", ["tenant", "reason"], registry=r
        )
        self.finished = Counter(
            "kvgate_requests_finished",
            "Requests that left the engine, by finish reason",
            ["tenant", "reason"],
            registry=r,
        )
        self.preemptions = Counter("kvgate_preemptions", "Preemptions, by mode", ["mode"], registry=r)
        self.swap_bytes = Counter("kvgate_swap_out_bytes", "KV bytes swapped out to the host tier", registry=r)
        self.evictions = Counter(
            "kvgate_evictions", "Retained state evicted, by policy and reason", ["policy", "reason"], registry=r
        )
        self.evicted_blocks = Counter(
            "kvgate_evicted_blocks", "Blocks of evicted retained state", ["policy", "reason"], registry=r
        )
        self.expirations = Counter("kvgate_session_expirations", "Sessions ended by idle timeout", registry=r)
        self.approximated = Counter(
            "kvgate_approximated_tokens", "KV tokens dropped by a token-level policy", registry=r
        )
        self.oom = Counter("kvgate_oom", "KV allocations that failed with nothing to preempt", registry=r)
        self.orphans = Counter(
            "kvgate_orphan_blocks_reconciled", "Block references released by the orphan check", registry=r
        )
        self.watermarks = Counter("kvgate_watermark_crossings", "Watermark levels entered", ["level"], registry=r)
        self.cancel_release = Histogram(
            "kvgate_cancel_release_latency_seconds",
            "Cancel received -> blocks back in the pool",
            buckets=RELEASE_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "kvgate_time_to_first_token_seconds",
            "Engine TTFT: arrival -> first token",
            ["traffic_class"],
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.step_lag = Histogram(
            "kvgate_engine_step_lag_seconds",
            "How late the loop came to a step after the last one's modelled end (or a wake-up)",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        labels = ["model_name"]
        self.vllm_preemptions = Counter(
            "vllm:num_preemptions", "Cumulative number of preemptions", labels, registry=r
        ).labels(model_name)
        self.vllm_ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token",
            labels,
            buckets=TTFT_BUCKETS,
            registry=r,
        ).labels(model_name)
        r.register(StateCollector(core, model_name))

    def on_events(self, events: Sequence[Event]) -> None:
        for e in events:
            kind = e.kind
            if kind is EventKind.FIRST_TOKEN:
                latency_s = e.latency_s
                assert latency_s is not None, "the scheduler emits first_token with its latency"
                self.ttft.labels(e.traffic_class).observe(latency_s)
                self.vllm_ttft.observe(latency_s)
            elif kind is EventKind.FINISHED:
                self.finished.labels(e.tenant, e.reason).inc()
            elif kind is EventKind.BLOCKS_RELEASED:
                if e.latency_s is not None:
                    self.cancel_release.observe(e.latency_s)
            elif kind is EventKind.ADMITTED or kind is EventKind.QUEUED:
                self.admissions.labels(e.tenant, e.traffic_class, kind.value).inc()
            elif kind is EventKind.REJECTED:
                self.rejections.labels(e.tenant, e.reason).inc()
                self.rejected_tokens.labels(e.tenant, e.reason).inc(e.num_tokens or 0)
            elif kind is EventKind.PREEMPTED:
                self.preemptions.labels(e.mode).inc()
                self.vllm_preemptions.inc()
            elif kind is EventKind.SWAPPED:
                self.swap_bytes.inc(e.num_bytes or 0)
            elif kind is EventKind.EVICTED:
                self.evictions.labels(e.mode, e.reason).inc()
                self.evicted_blocks.labels(e.mode, e.reason).inc(e.num_blocks or 0)
            elif kind is EventKind.EXPIRED:
                self.expirations.inc()
            elif kind is EventKind.APPROXIMATED:
                self.approximated.inc(e.num_tokens or 0)
            elif kind is EventKind.OOM:
                self.oom.inc()
            elif kind is EventKind.ORPHAN_RECONCILED:
                self.orphans.inc(e.num_blocks or 0)
            elif kind is EventKind.WATERMARK:
                self.watermarks.labels(e.reason).inc()

    def on_step(self, lag_s: float) -> None:
        self.step_lag.observe(lag_s)

    def render(self, *, with_tenants: bool) -> bytes:
        """The exposition text; without `with_tenants` no family labelled by tenant (an open
        /metrics must not list who the tenants are)."""
        families = list(self.registry.collect())
        return render_families(families if with_tenants else without_tenants(families))


def without_tenants(families: list[Metric]) -> list[Metric]:
    """The families that name no tenant (a family none of whose samples has a `tenant` label)."""
    return [f for f in families if not any(TENANT_LABEL in s.labels for s in f.samples)]


class _Collected(Collector):
    """A collector over families gathered beforehand."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def render_families(families: list[Metric]) -> bytes:
    """Prometheus text of `families` (one engine's, or the router's merged view)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collected(families))
    return generate_latest(registry)


class StateCollector(Collector):
    """Gauges read from the engine at scrape time: O(running + waiting + tenants)."""

    def __init__(self, core: EngineCore, model_name: str) -> None:
        self.core = core
        self.model_name = model_name

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        core = self.core
        s, pool, bt = core.snapshot(), core.pool, core.pool.block_tokens
        blocks = GaugeMetricFamily(
            "kvgate_kv_blocks", "KV blocks by state (retained, pinned and compacted are part of live)", labels=["state"]
        )
        for state, n in (
            ("live", s.live_blocks),
            ("active", s.active_blocks),
            ("retained", s.retained_blocks),
            ("pinned", s.pinned_blocks),
            ("compacted", s.compacted_blocks),
            ("cached", s.cached_blocks),
            ("free", s.free_blocks),
            ("pending", s.pending_blocks),
        ):
            blocks.add_metric([state], n)
        yield blocks
        yield GaugeMetricFamily("kvgate_kv_pool_blocks", "KV blocks in the pool", value=s.num_blocks)
        yield GaugeMetricFamily("kvgate_kv_usage_ratio", "Live blocks / pool blocks", value=s.usage)
        yield GaugeMetricFamily(
            "kvgate_kv_fragmentation_ratio", "Unused tail slots / slots of running requests", value=s.fragmentation
        )
        level = GaugeMetricFamily("kvgate_pressure_level", "Watermark level (0 normal .. 6 reject)", labels=["level"])
        level.add_metric([s.level], float(core.pressure))
        yield level
        requests = GaugeMetricFamily("kvgate_requests", "Requests in the engine by state", labels=["state"])
        for state, n in (
            ("running", s.num_running),
            ("waiting", s.num_waiting),
            ("swapped", s.num_swapped),
            ("prefilling", s.num_prefilling),
        ):
            requests.add_metric([state], n)
        yield requests
        depth = GaugeMetricFamily("kvgate_queue_depth", "Waiting requests per traffic class", labels=["traffic_class"])
        oldest = GaugeMetricFamily(
            "kvgate_queue_oldest_wait_seconds", "Longest current wait per traffic class", labels=["traffic_class"]
        )
        for traffic_class, n in s.waiting_by_class.items():
            depth.add_metric([traffic_class], n)
            oldest.add_metric([traffic_class], s.oldest_wait_s_by_class.get(traffic_class, 0.0))
        yield depth
        yield oldest
        live = GaugeMetricFamily("kvgate_tenant_live_blocks", "Live KV blocks per tenant", labels=["tenant"])
        share = GaugeMetricFamily("kvgate_tenant_kv_share", "Live share of the pool per tenant", labels=["tenant"])
        cap = GaugeMetricFamily("kvgate_tenant_kv_share_cap", "Hard cap on a tenant's live share", labels=["tenant"])
        reserved = GaugeMetricFamily(
            "kvgate_tenant_reserved_blocks",
            "Worst-case blocks reserved by a tenant's active requests",
            labels=["tenant"],
        )
        for t in core.tenants:
            live.add_metric([t.name], s.tenant_live_blocks.get(t.name, 0))
            share.add_metric([t.name], s.tenant_share(t.name))
            cap.add_metric([t.name], t.config.max_kv_share)
            reserved.add_metric([t.name], t.reserved_blocks)
        yield from (live, share, cap, reserved)
        yield GaugeMetricFamily(
            "kvgate_host_swap_used_bytes", "KV bytes held on the host tier", value=s.host_used_bytes
        )
        yield from _external_families(core, [self.model_name])
        if core.tiers is not None:
            yield from _tier_families(core.tiers, core.memory.block_tokens, [self.model_name])
        yield CounterMetricFamily(
            "kvgate_recompute_tokens",
            "Tokens recomputed after recompute preemptions",
            value=core.scheduler.recompute_tokens,
        )
        yield CounterMetricFamily(
            "kvgate_computed_tokens",
            "KV tokens computed by every step: prefill, decode and recompute",
            value=core.num_computed_tokens,
        )
        yield CounterMetricFamily(
            "kvgate_cached_blocks_evicted",
            "Cached (refcount 0) blocks reused for new data",
            value=pool.num_evicted_cached,
        )
        yield CounterMetricFamily(
            "kvgate_buffer_evicted_blocks",
            "Cached blocks evicted ahead of demand to keep the policy's free buffer (part of the above)",
            value=core.scheduler.num_buffer_evicted_blocks,
        )
        name = [self.model_name]
        info = GaugeMetricFamily(
            "vllm:cache_config_info", "The pool: blocks and tokens per block", labels=["block_size", "num_gpu_blocks"]
        )
        info.add_metric([str(bt), str(s.num_blocks)], 1.0)
        yield info
        for metric, help_text, value in (
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.usage),
            ("vllm:num_requests_running", "Number of requests in model execution batches.", s.num_running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.num_waiting),
        ):
            g = GaugeMetricFamily(metric, help_text, labels=["model_name"])
            g.add_metric(name, value)
            yield g
        for metric, help_text, value in (
            ("vllm:prefix_cache_queries", "Prefix cache queries, in queried tokens.", pool.num_prefix_queries * bt),
            ("vllm:prefix_cache_hits", "Prefix cache hits, in cached tokens.", pool.num_prefix_hits * bt),
        ):
            c = CounterMetricFamily(metric, help_text, labels=["model_name"])
            c.add_metric(name, value)
            yield c


# transfer_type labels: vLLM's GPU_to_CPU / CPU_to_GPU, and the same for the disk tier
_TRANSFER = {Tier.HOST: ("GPU_to_CPU", "CPU_to_GPU"), Tier.DISK: ("CPU_to_DISK", "DISK_to_GPU")}


def _external_families(core: EngineCore, model: list[str]) -> Iterator[Metric]:
    """vLLM's external prefix cache, in tokens: what a connector loaded instead of computing. Here
    the KV tiers' loads and a P/D pair's pulls (a pulled block is asked for and found); absent
    on an engine that has neither."""
    bt, tiers, pulled = core.memory.block_tokens, core.tiers, core.pool.num_external_hits
    if tiers is None and not pulled:
        return
    queried = pulled + (tiers.num_queried_blocks if tiers else 0)
    loaded = pulled + (sum(c.promoted for c in tiers.counters.values()) if tiers else 0)
    for metric, help_text, value in (
        ("vllm:external_prefix_cache_queries", "External prefix cache queries, in tokens.", queried * bt),
        ("vllm:external_prefix_cache_hits", "External prefix cache hits, in loaded tokens.", loaded * bt),
    ):
        c = CounterMetricFamily(metric, help_text, labels=["model_name"])
        c.add_metric(model, value)
        yield c


def _tier_families(tiers: TieredCache, block_tokens: int, model: list[str]) -> Iterator[Metric]:
    """The KV tiers below the GPU: vLLM's offloading names where it has them (bytes and seconds
    moved per transfer type, host cache usage; their loads are external prefix cache hits,
    `_external_families`), `kvgate_kv_tier_*{tier}` for the rest."""
    moved = CounterMetricFamily(
        "vllm:kv_offload_total_bytes", "KV bytes moved, by transfer type.", labels=["model_name", "transfer_type"]
    )
    timed = CounterMetricFamily(
        "vllm:kv_offload_total_time",
        "Seconds spent loading KV, by transfer type.",
        labels=["model_name", "transfer_type"],
    )
    usage = GaugeMetricFamily("kvgate_kv_tier_usage_perc", "Share of a tier's blocks in use (0..1).", labels=["tier"])
    per_tier = {
        "demoted": "Blocks written into the tier (demotions)",
        "write_dropped": "Evicted blocks the write-back could not take: dropped",
        "hit": "Blocks a prefix lookup found in the tier and loaded",
        "promoted": "Blocks loaded from the tier into the GPU",
        "failed": "Blocks of failed loads from the tier (recomputed)",
        "slower": "Blocks found in the tier but re-prefilled: faster than loading",
        "touched": "Blocks demoted while the tier still held them: no write",
        "corrupt_served": "Blocks of failed loads served anyway (fallback off: a broken target)",
    }
    families = {k: CounterMetricFamily(f"kvgate_kv_tier_{k}_blocks", h, labels=["tier"]) for k, h in per_tier.items()}
    for tier, counts in tiers.counters.items():
        if tier not in tiers.stores:
            continue
        out, into = _TRANSFER[tier]
        moved.add_metric([*model, out], counts.demoted * tiers.block_bytes)
        moved.add_metric([*model, into], counts.promoted * tiers.block_bytes)
        timed.add_metric([*model, into], counts.load_s)
        usage.add_metric([tier.value], tiers.used_blocks(tier) / max(1, tiers.capacity_blocks(tier)))
        for k, family in families.items():
            family.add_metric([tier.value], getattr(counts, k))
    yield from (moved, timed, usage, *families.values())
    if Tier.HOST in tiers.stores:
        host = GaugeMetricFamily(
            "vllm:kv_offload_cpu_cache_usage_perc", "Host (CPU) KV offload cache usage (0..1).", labels=["model_name"]
        )
        host.add_metric(model, tiers.used_blocks(Tier.HOST) / max(1, tiers.capacity_blocks(Tier.HOST)))
        yield host
