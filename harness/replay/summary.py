"""The figures a replay prints, computed from its run record alone (so any record works).

prefix hit rate   Σ hit tokens of `scheduled` events / Σ prompt tokens of those requests
                  (their `admitted`/`queued` events; record.query.prefix_hit_rate over the
                  whole run), every tier together; None without scheduled requests
hit rate by tier  the same split by where the hit tokens came from: gpu (the pool), host and
                  disk (blocks loaded back from the tiers below, `tier_load` events)
evicted blocks    cached prefix blocks the pool dropped (`meta.final`, replay and reference
                  targets) + blocks of `evicted` events (idle sessions)
TTFT P50 / P95    over requests with status ok, all classes together, never interpolated
                  (record.query.percentile, the gates' definition; the report and the
                  interactive_ttft gate show them per traffic class, load phase only)
peak live memory  max live blocks over the samples, in blocks, bytes and share of the pool
OOMs              `oom` events
rejections        requests the target refused with a 4xx (kv_capacity, tenant_quota,
                  queue_deadline, ...), by tenant; errors of any kind by error code
goodput           ok requests whose TTFT ≤ the SLO (default: the gates' `[slo] ttft_ms`),
                  per second of the load phase (the trace window; the whole run if it has
                  no load phase)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gates import load_thresholds
from record.query import WHOLE_RUN, percentile, prefix_hit_rate, prefix_hit_rates_by_tier
from record.run_record import RunRecord


@dataclass(frozen=True)
class ReplaySummary:
    run_id: str
    policy: str
    config_digest: str
    num_requests: int
    num_ok: int
    hit_rate: float | None
    hit_rate_by_tier: dict[str, float] | None  # gpu, and host / disk where the config has them
    num_evicted_blocks: int
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    peak_live_blocks: int | None
    peak_live_bytes: float | None
    peak_usage: float | None
    num_oom: int
    num_preemptions: int
    goodput_rps: float | None
    ttft_slo_s: float
    rejections_by_tenant: dict[str, int] = field(default_factory=dict)
    errors_by_code: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: RunRecord, ttft_slo_s: float | None = None) -> ReplaySummary:
        """The figures of `record`; goodput counts TTFTs within `ttft_slo_s` (None: the gates' objective)."""
        if ttft_slo_s is None:
            ttft_slo_s = load_thresholds().objective["ttft_ms"] / 1000
        meta, req, ev = record.meta, record.requests, record.events
        ok = req[req["status"] == "ok"]
        errors = req[req["status"] == "error"]
        ttft = ok["ttft_s"].dropna()
        peak_blocks, peak_bytes, peak_usage = _peak(record)
        return cls(
            run_id=meta.run_id,
            policy=meta.policy,
            config_digest=meta.config_digest,
            num_requests=len(req),
            num_ok=len(ok),
            hit_rate=prefix_hit_rate(record, WHOLE_RUN),
            hit_rate_by_tier=prefix_hit_rates_by_tier(record, WHOLE_RUN),
            num_evicted_blocks=int(meta.final.get("num_evicted_cached_blocks", 0))
            + int(ev.loc[ev["kind"] == "evicted", "num_blocks"].fillna(0).sum()),
            ttft_p50_s=percentile(ttft, 50) if len(ttft) else None,
            ttft_p95_s=percentile(ttft, 95) if len(ttft) else None,
            peak_live_blocks=peak_blocks,
            peak_live_bytes=peak_bytes,
            peak_usage=peak_usage,
            num_oom=int((ev["kind"] == "oom").sum()),
            num_preemptions=int((ev["kind"] == "preempted").sum()),
            goodput_rps=_goodput(record, ok, ttft_slo_s),
            ttft_slo_s=ttft_slo_s,
            rejections_by_tenant=_counts(errors.loc[errors["http_status"].between(400, 499), "tenant"]),
            errors_by_code=_counts(errors["error_code"]),
        )


def _counts(column: pd.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in column.fillna("unknown").value_counts().sort_index().items()}


def _peak(record: RunRecord) -> tuple[int | None, float | None, float | None]:
    live = record.samples["live_blocks"].dropna()
    if live.empty:
        return None, None, None
    peak = int(live.max())
    pool = record.meta.pool
    if pool is None:
        return peak, None, None
    return peak, peak * pool.bytes_per_block, peak / pool.num_blocks


def _goodput(record: RunRecord, ok: pd.DataFrame, slo_s: float) -> float | None:
    load = record.meta.phase("load")
    window_s = (load.end_s - load.start_s) if load is not None else 0.0
    window_s = window_s if window_s > 0 else record.meta.duration_s
    if window_s <= 0:
        return None
    return float((ok["ttft_s"] <= slo_s).sum() / window_s)
