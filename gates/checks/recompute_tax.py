"""recompute_tax: the share of the engine's compute spent redoing work that preemption discarded.

A recompute preemption frees a request's KV and computes it all again when the request resumes;
swap keeps it on the host instead. The tax is the computed tokens recompute preemptions
discarded (`meta.final.recompute_tokens`, the sum of `preempted.num_tokens`) over every token
the engine computed (`meta.final.computed_tokens`: prefill, decode and recompute). A prefix-cache
hit on resume can spare part of a discarded prefix, so the numerator is an upper bound of what
was really computed twice. The requests that lost most to recompute are the evidence.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import events_of
from record.run_record import RunRecord

METRIC = "max_fraction"
TOTALS = ("recompute_tokens", "computed_tokens")  # meta.final keys: numerator, denominator


class RecomputeTaxGate:
    name = "recompute_tax"
    sources = (Source.ENGINE_EVENTS,)
    title = "Recompute tax"
    metrics = {METRIC: "tokens recompute preemptions discarded / tokens the engine computed"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        raw_recomputed, raw_computed = (record.meta.final.get(key) for key in TOTALS)
        if raw_recomputed is None or raw_computed is None:
            return GateResult.not_measurable(
                self.name, "no run totals of recomputed and computed tokens (meta.final) in the record"
            )
        recomputed, computed = float(raw_recomputed), float(raw_computed)
        if computed <= 0:
            return GateResult.not_measurable(self.name, "the engine computed no token in this run")
        tax = recomputed / computed
        evidence: dict = {"recompute_tokens": recomputed, "computed_tokens": computed}
        if record.meta.signals.engine_events:
            preempted = events_of(record, "preempted")
            lost = preempted.groupby("request_id")["num_tokens"].sum().sort_values(ascending=False, kind="stable")
            evidence["num_preemptions_by_mode"] = preempted["mode"].value_counts().sort_index().to_dict()
            evidence["most_recomputed"] = [
                {"request_id": rid, "tokens": tokens} for rid, tokens in lost[lost > 0].head(5).items()
            ]
        explanation = f"{recomputed:,.0f} of {computed:,.0f} computed tokens redid work recompute discarded ({tax:.1%})"
        return GateResult.judged(
            self.name, [Measurement(METRIC, tax, limits[METRIC], Unit.FRACTION)], explanation, evidence
        )
