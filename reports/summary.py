"""The numbers that compare runs, computed from a run record alone: peak memory, P95 TTFT and
goodput per class, prefix hit ratio, evictions by reason, re-prefilled tokens, preemptions,
rejections by reason and by tenant, and the pressure summary the run recorded.

A number the record cannot support is None (shown as "n/a"), never 0: a target without engine
events has unknown evictions, not zero evictions.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from record.query import (
    counter_change,
    engine_ids,
    events_of,
    flag,
    live_usage,
    load_window,
    percentile,
    prefix_hit_rate,
    prefix_hit_rates_by_tier,
    requests_in_phase,
    ttft_ms,
    window_duration_s,
)
from record.run_record import Pressure, RunRecord
from reports.estimates import goodput_tokens_estimate

TRAFFIC_CLASSES = ("interactive", "batch", "system")


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    policy: str
    config_digest: str
    peak_live_usage: float | None
    peak_live_blocks: float | None
    p95_ttft_ms: dict[str, float]  # load phase, per traffic class that had answers
    prefix_hit_ratio: float | None  # hit tokens / prompt tokens of the requests scheduled under load
    prefix_hit_ratio_by_tier: dict[str, float] | None  # the same, per tier that served them (gpu, host, disk)
    evicted_blocks: float | None  # `evicted` events: retained state (idle sessions, ...)
    evicted_sessions_by_reason: dict[str, int] | None  # `evicted` events per reason, whole run
    evicted_cached_blocks: float | None  # cached prefix blocks reclaimed (meta.final run total)
    num_preemptions: int | None  # engine events; an external target's own counter (vLLM's)
    reprefill_preempted_tokens: float | None  # computed tokens recompute preemptions discarded
    reprefill_rebuilt_tokens: float | None  # prompt tokens of rebuilt session turns not hit in the cache
    rejections: dict[str, int]  # client view: error code (or "timeout") -> requests
    rejections_by_tenant: dict[str, int]  # client view: requests without an answer per tenant
    goodput_rps: float | None  # ok requests of the load phase per second of it
    goodput_rps_by_class: dict[str, float]  # the same per traffic class
    goodput_tokens_per_s: float | None
    pressure: Pressure | None  # meta.pressure as recorded; None for records older than it

    @property
    def label(self) -> str:
        return self.policy or self.run_id


def summarize(record: RunRecord) -> RunSummary:
    meta, samples = record.meta, record.samples
    usage = live_usage(samples).dropna()
    load = requests_in_phase(record, "load")
    p95 = {c: percentile(v, 95) for c in TRAFFIC_CLASSES if len(v := ttft_ms(load, c))}
    engine = meta.signals.engine_events
    evicted = events_of(record, "evicted")
    ok = load[load["status"] == "ok"]
    duration_s = window_duration_s(record, load_window(meta))
    goodput_tokens = goodput_tokens_estimate(record)
    return RunSummary(
        run_id=meta.run_id,
        policy=meta.policy,
        config_digest=meta.config_digest,
        peak_live_usage=float(usage.max()) if len(usage) else None,
        peak_live_blocks=float(samples["live_blocks"].max()) if samples["live_blocks"].notna().any() else None,
        p95_ttft_ms=p95,
        prefix_hit_ratio=prefix_hit_rate(record, load_window(meta)) if engine else None,
        prefix_hit_ratio_by_tier=prefix_hit_rates_by_tier(record, load_window(meta)) if engine else None,
        evicted_blocks=float(evicted["num_blocks"].fillna(1).sum()) if engine else None,
        evicted_sessions_by_reason=_counts(evicted["reason"].fillna("unknown")) if engine else None,
        evicted_cached_blocks=meta.final.get("num_evicted_cached_blocks"),
        num_preemptions=len(events_of(record, "preempted")) if engine else _counted(record, "num_preemptions"),
        reprefill_preempted_tokens=reprefill_preempted_tokens(record),
        reprefill_rebuilt_tokens=reprefill_rebuilt_tokens(record),
        rejections=rejections_by_reason(record),
        rejections_by_tenant=_counts(_unanswered(record.requests)["tenant"].fillna("unknown")),
        goodput_rps=len(ok) / duration_s if duration_s else None,
        goodput_rps_by_class={
            c: float((ok["traffic_class"] == c).sum()) / duration_s
            for c in TRAFFIC_CLASSES
            if (load["traffic_class"] == c).any()
        }
        if duration_s
        else {},
        goodput_tokens_per_s=None if goodput_tokens is None else goodput_tokens.value,
        pressure=meta.pressure,
    )


def rejections_by_reason(record: RunRecord) -> dict[str, int]:
    """Requests that got no answer, by the reason the client saw: the error code, `timeout`,
    or `http <status>` for an error without a code."""
    failed = _unanswered(record.requests)
    reason = failed["error_code"].fillna("http " + failed["http_status"].astype("Int64").astype(str))
    return _counts(reason.where(failed["status"] != "timeout", "timeout"))


def reprefill_preempted_tokens(record: RunRecord) -> float | None:
    """Tokens computed again after recompute preemptions: the `num_tokens` of `preempted` events
    with mode recompute (the computed tokens each one discarded), else the engine's run total
    `meta.final.recompute_tokens` for a log without them; 0 when nothing was preempted that way.
    Prefix-cache hits on resume are not subtracted: the engine counts the same way."""
    if not record.meta.signals.engine_events:
        return None
    recomputed = events_of(record, "preempted")
    recomputed = recomputed[recomputed["mode"] == "recompute"]
    if recomputed.empty:
        return 0.0
    if recomputed["num_tokens"].notna().any():
        return float(recomputed["num_tokens"].sum())
    total = record.meta.final.get("recompute_tokens")
    return None if total is None else float(total)


def reprefill_rebuilt_tokens(record: RunRecord) -> float | None:
    """Tokens prefilled again for sessions whose KV was gone: over the requests flagged
    `session_rebuilt` that the engine scheduled, their prompt tokens minus the prefix-cache hits
    of their `scheduled` event. It includes each rebuilt turn's new message (tens of tokens
    against a history of thousands). None without engine events (the hits are unknown)."""
    if not record.meta.signals.engine_events:
        return None
    requests = record.requests
    rebuilt = requests[flag(requests["session_rebuilt"])]
    scheduled = events_of(record, "scheduled").drop_duplicates("request_id").set_index("request_id")["num_tokens"]
    hits = scheduled.reindex(engine_ids(rebuilt)).to_numpy()
    prefilled = rebuilt["prompt_tokens"].to_numpy(dtype=float) - hits
    return float(prefilled[~pd.isna(prefilled)].clip(min=0).sum())


def _unanswered(requests: pd.DataFrame) -> pd.DataFrame:
    return requests[requests["status"].isin(("error", "timeout", "unfinished"))]


def _counts(values: pd.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in values.value_counts().sort_index().items()}


def _counted(record: RunRecord, counter: str) -> int | None:
    """An external target's own counter over the run (vLLM's `vllm:num_preemptions_total`): where
    there are no engine events, the target's count is the number."""
    change = counter_change(record.meta, counter)
    return None if change is None else int(change)
