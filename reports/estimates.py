"""A run's numbers with their noise: the per-request samples behind them, as gates/noise.py takes them.

    ttft_estimate(record, "interactive", 95)    # P95 TTFT under load, bootstrapped over its requests
    hit_ratio_estimate(record)                  # prefix hit tokens / prompt tokens, by request

Shared by the release gate's metrics (reports/regression_metrics.py) and the comparison's decision
(reports/metrics.py), so both test a difference on the same samples. A value is the one the
report shows (record.query's percentile, the summary's hit ratio); only its variance comes from
resampling.
"""

from __future__ import annotations

from gates.noise import Estimate, bootstrap_estimate, ratio_estimate
from record.query import (
    load_window,
    percentile,
    requests_in_phase,
    scheduled_in,
    scheduled_prompt_tokens,
    ttft_ms,
    window_duration_s,
)
from record.run_record import RunRecord


def ttft_estimate(record: RunRecord, traffic_class: str, q: float) -> Estimate | None:
    """The q-th percentile of the load phase's TTFTs of one class (ms), with its bootstrap
    variance; None without answers, or when it is a timeout (infinite)."""
    values = ttft_ms(requests_in_phase(record, "load"), traffic_class).to_numpy(dtype=float)
    return bootstrap_estimate(values, lambda rows: percentile(rows, q))


def hit_ratio_estimate(record: RunRecord, value: float | None) -> Estimate | None:
    """The run's prefix hit ratio `value` (every tier) with the bootstrap variance of its GPU
    hits over the requests scheduled under load (a request's blocks hit or miss together); the
    value alone where the engine's events do not say per request."""
    if value is None:
        return None
    if not record.meta.signals.engine_events:
        return Estimate(value)
    window = load_window(record.meta)
    hits = scheduled_in(record, window)
    prompts = scheduled_prompt_tokens(record, window).to_numpy(dtype=float)
    sampled = ratio_estimate(hits["num_tokens"].fillna(0).to_numpy(dtype=float), prompts)
    return Estimate(value, None if sampled is None else sampled.sampling_var)


def goodput_tokens_estimate(record: RunRecord) -> Estimate | None:
    """Completion tokens of the load phase's ok answers per second of it (the summary's goodput),
    with the variance of a sum over independently arriving requests: Σ tokens² / duration²."""
    duration_s = window_duration_s(record, load_window(record.meta))
    if not duration_s:
        return None
    load = requests_in_phase(record, "load")
    tokens = load.loc[load["status"] == "ok", "completion_tokens"].fillna(0).to_numpy(dtype=float)
    return Estimate(float(tokens.sum()) / duration_s, float((tokens**2).sum()) / duration_s**2)
