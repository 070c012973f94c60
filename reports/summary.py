"""The handful of numbers that compare runs: peak memory, P95 TTFT per class, evictions,
preemptions, rejections by reason and goodput — computed from a run record alone.

A number the record cannot support is None (shown as "n/a"), never 0: a target without engine
events has unknown evictions, not zero evictions.
"""

from __future__ import annotations

from dataclasses import dataclass

from gates.query import (
    events_of,
    live_usage,
    load_window,
    percentile,
    requests_in_phase,
    ttft_ms,
    window_duration_s,
)
from harness.run_record import RunRecord

TRAFFIC_CLASSES = ("interactive", "batch", "system")


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    policy: str
    config_digest: str
    peak_live_usage: float | None
    peak_live_blocks: float | None
    p95_ttft_ms: dict[str, float]  # load phase, per traffic class that had answers
    evicted_blocks: float | None  # `evicted` events: retained state (idle sessions, ...)
    evicted_cached_blocks: float | None  # cached prefix blocks reclaimed (meta.final run total)
    num_preemptions: int | None
    rejections: dict[str, int]  # client view: error code (or "timeout") -> requests
    goodput_rps: float | None  # ok requests of the load phase per second of it
    goodput_tokens_per_s: float | None

    @property
    def label(self) -> str:
        return self.policy or self.run_id


def summarize(record: RunRecord) -> RunSummary:
    meta, samples = record.meta, record.samples
    usage = live_usage(samples).dropna()
    load = requests_in_phase(record, "load")
    p95 = {c: percentile(v, 95) for c in TRAFFIC_CLASSES if len(v := ttft_ms(load, c))}
    engine = meta.signals.engine_events
    ok = load[load["status"] == "ok"]
    duration_s = window_duration_s(record, load_window(meta))
    return RunSummary(
        run_id=meta.run_id,
        policy=meta.policy,
        config_digest=meta.config_digest,
        peak_live_usage=float(usage.max()) if len(usage) else None,
        peak_live_blocks=float(samples["live_blocks"].max()) if samples["live_blocks"].notna().any() else None,
        p95_ttft_ms=p95,
        evicted_blocks=float(events_of(record, "evicted")["num_blocks"].fillna(1).sum()) if engine else None,
        evicted_cached_blocks=meta.final.get("num_evicted_cached_blocks"),
        num_preemptions=len(events_of(record, "preempted")) if engine else None,
        rejections=rejections_by_reason(record),
        goodput_rps=len(ok) / duration_s if duration_s else None,
        goodput_tokens_per_s=float(ok["completion_tokens"].sum()) / duration_s if duration_s else None,
    )


def rejections_by_reason(record: RunRecord) -> dict[str, int]:
    """Requests that got no answer, by the reason the client saw: the error code, `timeout`,
    or `http <status>` for an error without a code."""
    req = record.requests
    failed = req[req["status"].isin(("error", "timeout"))]
    reason = failed["error_code"].fillna("http " + failed["http_status"].astype("Int64").astype(str))
    reason = reason.where(failed["status"] != "timeout", "timeout")
    return {str(k): int(v) for k, v in reason.value_counts().sort_index().items()}
