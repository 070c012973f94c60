"""interactive_ttft: interactive users get their first token fast under load (client view).

Two checks, on the tail and on the typical request:
- P95 TTFT of *critical* interactive requests (gates/slo.py: interactive class, prompt of at most
  `slo.critical_max_prompt_tokens`) in the `load` phase stays within the shared objective
  `slo.ttft_ms` (a release gate: docs/background.md). A 32K-token prompt needs over a second of
  prefill on its own, so it is judged by its explicit outcome (explicit_overflow), not by a chat
  user's TTFT budget.
- No order-of-magnitude degradation against the same traffic unloaded: the *median* TTFT of the
  load phase's requests shaped like the `baseline` phase's (interactive, prompts no longer than
  the baseline's) stays within `max_degradation`× the baseline's median. The median, not the
  P95: an unloaded reference of a few milliseconds (a fast server, the simulated GPU) makes every
  queueing delay in the tail look like a tenfold degradation, and a P95 of a few dozen unloaded
  requests moves by a third between identical runs; the tail has the absolute bound above.
A request that timed out without a first token counts as infinitely slow; an explicit error (a 429
with a reason) has no TTFT: `goodput` counts it against the objective, `rejections` bounds it.
"""

from __future__ import annotations

import pandas as pd

from gates import slo
from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import percentile, requests_in_phase, ttft_ms, worst
from record.run_record import RunRecord

TRAFFIC_CLASS = "interactive"


class InteractiveTtftGate:
    name = "interactive_ttft"
    sources = (Source.CLIENT_REQUESTS,)
    title = "Interactive TTFT under load"
    metrics = {
        "max_degradation": (
            "load median / baseline median TTFT of requests shaped like the baseline's (10 = one order of magnitude)"
        )
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if not record.meta.signals.client_requests:
            return GateResult.not_measurable(self.name, "no client requests in the record")
        load = ttft_ms(slo.critical(requests_in_phase(record, "load"), limits), TRAFFIC_CLASS)
        if load.empty:
            return GateResult.not_measurable(self.name, "no interactive request in the load phase got an answer")
        p95 = percentile(load, 95)
        measurements = [Measurement(slo.TTFT_MS, p95, limits[slo.TTFT_MS], Unit.MILLISECONDS)]
        ids = record.requests["request_id"]
        evidence: dict = {"num_requests": len(load), "worst": worst(load, ids)}
        base_rows = requests_in_phase(record, "baseline")
        baseline = ttft_ms(slo.critical(base_rows, limits), TRAFFIC_CLASS)
        base_median = percentile(baseline, 50)
        largest = _largest_prompt(base_rows, limits[slo.CRITICAL_MAX_PROMPT_TOKENS])
        shaped = ttft_ms(slo.interactive_up_to(requests_in_phase(record, "load"), largest), TRAFFIC_CLASS)
        if base_median > 0 and len(shaped):
            ratio = percentile(shaped, 50) / base_median
            measurements.append(Measurement("max_degradation", ratio, limits["max_degradation"], Unit.RATIO))
            evidence.update(
                baseline_median_ms=base_median,
                baseline_requests=len(baseline),
                load_median_ms=percentile(shaped, 50),
                load_like_baseline=len(shaped),
            )
            versus = (
                f"; median {percentile(shaped, 50):.0f} ms over {len(shaped)} requests shaped like the "
                f"baseline's, {ratio:.1f}× its unloaded median of {base_median:.0f} ms"
            )
        else:
            versus = "; degradation not measured (no baseline phase with interactive answers)"
            evidence["baseline"] = "absent"
        explanation = (
            f"interactive P95 TTFT under load {p95:.0f} ms over {len(load)} requests with prompts "
            f"≤ {limits[slo.CRITICAL_MAX_PROMPT_TOKENS]:.0f} tokens{versus}"
        )
        return GateResult.judged(self.name, measurements, explanation, evidence)


def _largest_prompt(baseline: pd.DataFrame, critical: float) -> float:
    """The longest prompt the baseline sent: load requests up to it are "the same traffic"
    (the critical bound when the baseline's sizes are unknown)."""
    sizes = baseline["prompt_tokens"].dropna()
    return float(sizes.max()) if len(sizes) else critical
