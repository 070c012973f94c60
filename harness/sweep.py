"""A rate sweep: open-loop chat at rising rates, each step judged by the SLO gates alone.

    steps = [judge_step(rate, RunRecord.load(d), thresholds) for rate, d in ...]
    best = highest_passing(steps)          # reports/sweep.py: the highest rate before the first failure

A step passes when both SLO gates (`SLO_GATES`: the interactive P95 TTFT within `[slo] ttft_ms`
and goodput above its floor, both from gates/thresholds.toml) are measured and pass. The sweep
stops at the first step that does not: the rate before it is the highest that meets the SLO.
A step whose client lagged past its bound (harness/load_report.py) is a harness error: the
sweep stops there too, and its highest rate is a lower bound, the client's limit and not the
target's. A step lasts `--duration`, or longer where its rate would offer fewer than
`MIN_STEP_REQUESTS` in that time (`step_duration_s`): at 0.1/s a 15-second step may send nothing,
and a P95 over a handful of requests is their maximum. Steps have no baseline phase, so
`interactive_ttft` judges the absolute objective only (its tenfold-degradation check needs an
unloaded reference, and asks another question).
"""

from __future__ import annotations

from typing import Any

from gates import Outcome, Thresholds, evaluate, slo
from record.run_record import RunRecord
from reports.sweep import StepOutcome, SweepStep

SLO_GATES = ("interactive_ttft", "goodput")
GOODPUT_METRIC = "min_fraction"
MIN_STEP_REQUESTS = 20
"""Requests each step offers at least, on average: the fewest whose P95 is not simply their maximum."""


def step_duration_s(rate_per_s: float, duration_s: float) -> float:
    """A step's load time: `duration_s`, stretched to offer `MIN_STEP_REQUESTS` at a slow rate."""
    return max(duration_s, MIN_STEP_REQUESTS / rate_per_s)


def judge_step(rate_per_s: float, record: RunRecord, thresholds: Thresholds) -> SweepStep:
    """The step's outcome and figures; its verdict (the SLO gates only) is written beside it."""
    summary: dict[str, Any] = (record.meta.model_extra or {}).get("live", {}).get("open_loop", {})
    load = record.meta.phase("load")
    answered = record.requests[(record.requests["phase"] == "load") & (record.requests["status"] == "ok")]
    span_s = (load.end_s - load.start_s) if load is not None else 0.0
    figures: dict[str, Any] = {
        "rate_per_s": rate_per_s,
        "run_dir": record.dir,
        "num_sent": int(summary.get("num_sent", 0)),
        "num_ok": len(answered),
        "achieved_per_s": len(answered) / span_s if span_s > 0 else None,
        "p95_ttft_from_intended_ms": summary.get("ttft_ms_from_intended", {}).get("p95"),
        "lag_p99_ms": summary.get("client_lag", {}).get("p99_ms"),
    }
    if (error := record.meta.harness_error) is not None:
        return SweepStep(
            outcome=StepOutcome.HARNESS_ERROR, explanation=error, p95_ttft_ms=None, goodput=None, **figures
        )
    verdict = evaluate(record, thresholds, only=SLO_GATES)
    verdict.write(record.dir)
    passed = all(r.outcome is Outcome.PASS for r in verdict.results)
    ttft, goodput = verdict.result("interactive_ttft"), verdict.result("goodput")
    return SweepStep(
        outcome=StepOutcome.PASS if passed else StepOutcome.FAIL,
        explanation="; ".join(f"{r.gate} {r.outcome.value}: {r.explanation}" for r in verdict.results),
        p95_ttft_ms=_value(ttft, slo.TTFT_MS),
        goodput=_value(goodput, GOODPUT_METRIC),
        **figures,
    )


def _value(result: Any, metric: str) -> float | None:
    if result is None:
        return None
    return next((m.value for m in result.measurements if m.metric == metric), None)


def step_rates(*, start_per_s: float, factor: float, num_steps: int) -> list[float]:
    """`num_steps` rates from `start_per_s`, each `factor` times the last."""
    return [start_per_s * factor**k for k in range(num_steps)]
