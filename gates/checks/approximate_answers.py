"""approximate_answers: answers computed from dropped KV are bounded per class; critical chat
traffic gets exact answers.

A token-level policy (`streamingllm`, `h2o`) drops KV tokens of long sequences and answers from
what is left; the server says so per request (`x-kvgate-approximate`, the record's `approximate`
column). How far such answers drift from the exact ones is measured on the torch executor
(bench/bench_approximate_quality.py, docs/policies.md); this gate bounds how many there are.
Over every answered request of the run (status ok; an approximate answer is one whenever it
came), the share answered approximately, per group of traffic (gates/slo.py `GROUPS`: critical
chat, interactive with a longer prompt, batch, system), each against its own bound.

A target that never says whether it approximated (no engine of this kind does) reads as exact.
"""

from __future__ import annotations

from gates import slo
from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import flag
from record.run_record import RunRecord


class ApproximateAnswersGate:
    name = "approximate_answers"
    sources = (Source.CLIENT_REQUESTS,)
    title = "Approximate answers bounded"
    metrics = slo.group_metrics("answered that got an approximate answer")

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        answered = record.requests[record.requests["status"] == "ok"]
        if not (record.meta.signals.client_requests and len(answered)):
            return GateResult.not_measurable(self.name, "no client request was answered in this record")
        groups = slo.group_of(answered, limits)
        measurements, found, evidence = [], [], {}
        for group in slo.GROUPS:
            metric, rows = slo.group_metric(group), answered[groups == group]
            if rows.empty:
                continue
            approximate = flag(rows["approximate"])
            share = float(approximate.mean())
            measurements.append(Measurement(metric, share, limits[metric], Unit.FRACTION))
            found.append(f"{group} {share:.1%} of {len(rows)}")
            evidence[group] = {
                "num_answered": len(rows),
                "num_approximate": int(approximate.sum()),
                "approximate": rows.loc[approximate, "request_id"].head(5).tolist(),
            }
        return GateResult.judged(self.name, measurements, "answered approximately: " + ", ".join(found), evidence)
