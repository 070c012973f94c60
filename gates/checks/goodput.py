"""goodput: the share of the critical chat work offered under load that was served in time.

Offered: every critical interactive request (gates/slo.py: interactive class, prompt within
`slo.critical_max_prompt_tokens`) sent in the load phase — refused (429, 503), hung, failed and
answered alike; intended cancels are left out (the client chose to leave). Served in time: status
ok with a first token within `slo.ttft_ms`; an answer without a first token (an empty answer) is
not served. So a target cannot pass by refusing most of the work and answering the rest fast, as
`interactive_ttft` alone (which sees only the answers) would let it; and a target that answers
nothing fails, it is never "not measurable" while requests were offered.

`min_fraction` is the floor. In a matrix, no candidate's goodput may be below the best
baseline's either (`gates.comparison.goodput_shortfalls`): that rule needs several runs, so it
is applied by `kvgate matrix`, not here.
"""

from __future__ import annotations

import pandas as pd

from gates import slo
from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import intended_cancels, requests_in_phase
from record.run_record import RunRecord

METRIC = "min_fraction"


class GoodputGate:
    name = "goodput"
    sources = (Source.CLIENT_REQUESTS,)
    title = "Goodput: offered chat served in time"
    metrics = {METRIC: "share of the critical interactive requests offered under load answered within [slo] ttft_ms"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if not record.meta.signals.client_requests:
            return GateResult.not_measurable(self.name, "no client requests in the record")
        load = requests_in_phase(record, "load")
        offered = slo.critical(load[~intended_cancels(load)], limits)
        if offered.empty:
            return GateResult.not_measurable(self.name, "no critical interactive request was offered under load")
        in_time = served_in_time(offered, limits)
        fraction = float(in_time.mean())
        missed = offered[~in_time]
        evidence = {
            "num_offered": len(offered),
            "num_in_time": int(in_time.sum()),
            "missed_by_outcome": _missed_by_outcome(missed),
            "missed": missed["request_id"].head(5).tolist(),
        }
        explanation = (
            f"{int(in_time.sum())} of {len(offered)} critical interactive requests offered under load "
            f"were answered within {limits[slo.TTFT_MS]:.0f} ms ({fraction:.1%})"
        )
        measurement = Measurement(METRIC, fraction, limits[METRIC], Unit.FRACTION, is_max=False)
        return GateResult.judged(self.name, [measurement], explanation, evidence)


def served_in_time(requests: pd.DataFrame, limits: Limits) -> pd.Series:
    """Per request: answered (status ok) with a first token within the objective."""
    return (requests["status"] == "ok") & (requests["ttft_s"] * 1000.0 <= limits[slo.TTFT_MS])


def _missed_by_outcome(missed: pd.DataFrame) -> dict[str, int]:
    """Why each miss missed: the error code of a refusal or failure, `timeout`, `late` (answered
    after the objective) or `no_first_token` (an answer with no content)."""
    ok = missed["status"] == "ok"
    why = missed["error_code"].fillna("http " + missed["http_status"].astype("Int64").astype(str))
    why = why.where(missed["status"] != "timeout", "timeout")
    why = why.where(~ok, missed["ttft_s"].map(lambda t: "no_first_token" if pd.isna(t) else "late"))
    return {str(k): int(v) for k, v in why.value_counts().sort_index().items()}
