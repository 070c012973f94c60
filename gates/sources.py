"""Where a gate's numbers come from: the record's signals, named as a report reader knows them.

Each gate declares the sources it can read (`Gate.sources`); `evaluate` keeps, on each result,
the ones this record had (`GateResult.sources`), so a verdict says what every gate rested on —
the client's own view, the engine's events, a Prometheus scrape — and a reader of a run against
vLLM sees at once which gates stood on kvgate's engine telemetry and which did not.
"""

from __future__ import annotations

from enum import Enum

from record.run_record import RunMeta


class Source(str, Enum):
    CLIENT_REQUESTS = "client_requests"
    ENGINE_EVENTS = "engine_events"
    ENGINE_SAMPLES = "engine_samples"
    TENANT_SAMPLES = "tenant_samples"
    GPU_MEMORY = "gpu_memory"
    PROMETHEUS = "prometheus"
    ENGINE_STATE = "engine_state"
    KV_EVENTS = "kv_events"
    PROBES = "probes"
    TENANT_ESTIMATE = "tenant_estimate"
    ENGINE_RESTARTS = "engine_restarts"
    PREEMPTIONS = "preemptions"
    TARGET_LOG = "target_log"

    @property
    def label(self) -> str:
        return LABELS[self]

    def is_in(self, meta: RunMeta) -> bool:
        """The record has this source."""
        if self is Source.ENGINE_STATE:
            return bool(meta.initial) and bool(meta.final)
        if self is Source.PROBES:
            return bool(meta.probes)
        if self in COLLECTED:
            status = meta.collectors.get(self.value)
            return status is not None and status.available
        return bool(getattr(meta.signals, self.value))


COLLECTED = frozenset(
    {Source.KV_EVENTS, Source.TENANT_ESTIMATE, Source.ENGINE_RESTARTS, Source.PREEMPTIONS, Source.TARGET_LOG}
)
"""Sources a live run's collectors say they had in `meta.collectors` (keyed by the source's value)."""


LABELS: dict[Source, str] = {
    Source.CLIENT_REQUESTS: "client requests",
    Source.ENGINE_EVENTS: "engine events",
    Source.ENGINE_SAMPLES: "engine usage samples",
    Source.TENANT_SAMPLES: "per-tenant samples",
    Source.GPU_MEMORY: "GPU memory (NVML)",
    Source.PROMETHEUS: "Prometheus metrics",
    Source.ENGINE_STATE: "engine pool state before and after the run",
    Source.KV_EVENTS: "the engine's KV cache events (vLLM over ZMQ)",
    Source.PROBES: "prefix-cache isolation probes before the load",
    Source.TENANT_ESTIMATE: "per-tenant KV estimated from the client's in-flight requests",
    Source.ENGINE_RESTARTS: "engine restarts seen from outside (process start time, /health)",
    Source.PREEMPTIONS: "the engine's preemption counter (pressure, not OOM)",
    Source.TARGET_LOG: "OOM patterns in the target's log (--target-log)",
}
