"""interactive_ttft: interactive users get their first token fast under load (client view).

P95 TTFT of *critical* interactive requests in the `load` phase must stay under `p95_max_ms`,
and must not degrade by more than `max_degradation`× against the same traffic unloaded
(`baseline` phase). Critical means interactive class with a prompt of at most
`critical_max_prompt_tokens`: a 32K-token prompt needs over a second of prefill on its own, so
it is judged by its explicit outcome (explicit_overflow), not by a chat user's TTFT budget.
A request that timed out without a first token counts as infinitely slow; an explicit error
(a 429 with a reason) has no TTFT and is judged by the `explicit_overflow` gate instead.
"""

from __future__ import annotations

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.query import percentile, requests_in_phase, ttft_ms, worst
from harness.run_record import RunRecord

TRAFFIC_CLASS = "interactive"


class InteractiveTtftGate:
    name = "interactive_ttft"
    title = "Interactive TTFT under load"
    metrics = {
        "p95_max_ms": "P95 time to first token of interactive requests in the load phase, ms",
        "max_degradation": "load P95 / baseline P95 of the same traffic (10 = one order of magnitude)",
        "critical_max_prompt_tokens": "interactive requests with longer prompts are not critical traffic",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if not record.meta.signals.client_requests:
            return GateResult.not_measurable(self.name, "no client requests in the record")
        critical = limits["critical_max_prompt_tokens"]
        load = ttft_ms(_critical(requests_in_phase(record, "load"), critical), TRAFFIC_CLASS)
        if load.empty:
            return GateResult.not_measurable(self.name, "no interactive request in the load phase got an answer")
        p95 = percentile(load, 95)
        measurements = [Measurement("p95_max_ms", p95, limits["p95_max_ms"], Unit.MILLISECONDS)]
        ids = record.requests["request_id"]
        evidence: dict = {"num_requests": len(load), "worst": worst(load, ids)}
        baseline = ttft_ms(_critical(requests_in_phase(record, "baseline"), critical), TRAFFIC_CLASS)
        base_p95 = percentile(baseline, 95)
        if base_p95 > 0:
            ratio = p95 / base_p95
            measurements.append(Measurement("max_degradation", ratio, limits["max_degradation"], Unit.RATIO))
            evidence["baseline_p95_ms"] = base_p95
            versus = f", {ratio:.1f}× the unloaded P95 of {base_p95:.0f} ms"
        else:
            versus = "; degradation not measured (no baseline phase with interactive answers)"
            evidence["baseline"] = "absent"
        explanation = (f"interactive P95 TTFT under load {p95:.0f} ms over {len(load)} requests with prompts "
                       f"≤ {critical:.0f} tokens{versus}")
        return GateResult.judged(self.name, measurements, explanation, evidence)


def _critical(requests: pd.DataFrame, max_prompt_tokens: float) -> pd.DataFrame:
    """Requests whose prompt is short enough to be a chat user's (unknown size: kept)."""
    prompt = requests["prompt_tokens"]
    return requests[prompt.isna() | (prompt <= max_prompt_tokens)]

