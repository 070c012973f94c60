"""interactive_ttft: interactive users get their first token fast under load (client view).

P95 TTFT of *critical* interactive requests (gates/slo.py: interactive class, prompt of at most
`slo.critical_max_prompt_tokens`) in the `load` phase must stay within the shared objective
`slo.ttft_ms`, and must not degrade by more than `max_degradation`× against the same traffic
unloaded (`baseline` phase). A 32K-token prompt needs over a second of prefill on its own, so it
is judged by its explicit outcome (explicit_overflow), not by a chat user's TTFT budget. A
request that timed out without a first token counts as infinitely slow; an explicit error (a 429
with a reason) has no TTFT: `goodput` counts it against the objective, `rejections` bounds it.
"""

from __future__ import annotations

from gates import slo
from gates.base import GateResult, Limits, Measurement, Unit
from gates.query import percentile, requests_in_phase, ttft_ms, worst
from harness.run_record import RunRecord

TRAFFIC_CLASS = "interactive"


class InteractiveTtftGate:
    name = "interactive_ttft"
    title = "Interactive TTFT under load"
    metrics = {"max_degradation": "load P95 / baseline P95 of the same traffic (10 = one order of magnitude)"}

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
        baseline = ttft_ms(slo.critical(requests_in_phase(record, "baseline"), limits), TRAFFIC_CLASS)
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
                       f"≤ {limits[slo.CRITICAL_MAX_PROMPT_TOKENS]:.0f} tokens{versus}")
        return GateResult.judged(self.name, measurements, explanation, evidence)
