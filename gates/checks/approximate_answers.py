"""approximate_answers: answers computed from dropped KV are bounded per class; critical chat
traffic gets exact answers.

A token-level policy (`streamingllm`, `h2o`) drops KV tokens of long sequences and answers from
what is left; the server says so per request (`x-kvgate-approximate`, the record's `approximate`
column). How far such answers drift from the exact ones is measured on the torch executor
(bench/bench_approximate_quality.py, docs/policies.md); this gate bounds how many there are.
Over every answered request of the run (status ok; an approximate answer is one whenever it
came), the share answered approximately, per class, each against its own bound:

    critical     interactive, prompt within `slo.critical_max_prompt_tokens` (gates/slo.py)
    long_prompt  interactive with a longer prompt: a long document a user chose to send
    batch, system

A target that never says whether it approximated (no engine of this kind does) reads as exact.
"""

from __future__ import annotations

import pandas as pd

from gates import slo
from gates.base import GateResult, Limits, Measurement, Unit
from gates.query import flag
from harness.run_record import RunRecord

CLASS_METRICS = {"critical": "max_critical_fraction", "long_prompt": "max_long_prompt_fraction",
                 "batch": "max_batch_fraction", "system": "max_system_fraction"}


class ApproximateAnswersGate:
    name = "approximate_answers"
    title = "Approximate answers bounded"
    metrics = {
        "max_critical_fraction": "share of answered critical interactive requests answered approximately",
        "max_long_prompt_fraction": "share of answered interactive requests with longer prompts answered approximately",
        "max_batch_fraction": "share of answered batch requests answered approximately",
        "max_system_fraction": "share of answered system requests answered approximately",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        req = record.requests
        if not record.meta.signals.client_requests or req.empty:
            return GateResult.not_measurable(self.name, "no client requests in the record")
        answered = req[req["status"] == "ok"]
        groups = _by_class(answered, limits)
        measurements, found, evidence = [], [], {}
        for group, metric in CLASS_METRICS.items():
            rows = answered[groups == group]
            if rows.empty:
                continue
            approximate = flag(rows["approximate"])
            share = float(approximate.mean())
            measurements.append(Measurement(metric, share, limits[metric], Unit.FRACTION))
            found.append(f"{group} {share:.1%} of {len(rows)}")
            evidence[group] = {"num_answered": len(rows), "num_approximate": int(approximate.sum()),
                               "approximate": rows.loc[approximate, "request_id"].head(5).tolist()}
        if not measurements:
            return GateResult.not_measurable(self.name, "no request was answered in this run")
        return GateResult.judged(self.name, measurements, "answered approximately: " + ", ".join(found), evidence)


def _by_class(requests: pd.DataFrame, limits: Limits) -> pd.Series:
    """Each request's group: critical, long_prompt (interactive, not critical), or its class."""
    groups = requests["traffic_class"].where(requests["traffic_class"] != "interactive", "long_prompt")
    return groups.mask(requests.index.isin(slo.critical(requests, limits).index), "critical")
