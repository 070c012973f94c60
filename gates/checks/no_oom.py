"""no_oom: nothing ran out of memory — zero OOM in the pressure window, because an OOM fails the
whole running batch, not the one request that asked for more (docs/background.md).

Three independent witnesses, each used when the record has it: engine `oom` events (an
allocation failed), client responses 5xx with code `out_of_memory` (or `oom`), and GPU memory samples over
capacity. The whole run is counted, which includes the pressure window and is never weaker.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from record.outcomes import OOM_ERROR_CODES
from record.query import events_of
from record.run_record import RunRecord



class NoOomGate:
    name = "no_oom"
    title = "Zero OOM"
    metrics = {
        "max_oom": "OOMs allowed: engine oom events + 5xx out_of_memory responses + samples over GPU capacity",
        "max_gpu_mem_fraction": "GPU memory used / total above which a sample counts as over capacity",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        signals = record.meta.signals
        counts: dict[str, int] = {}
        evidence: dict = {}
        if signals.engine_events:
            ooms = events_of(record, "oom")
            counts["engine oom events"] = len(ooms)
            evidence["oom_events"] = ooms[["t_s", "request_id", "num_blocks"]].head(5).to_dict("records")
        if signals.client_requests and len(record.requests):
            req = record.requests
            bad = req[(req["http_status"] >= 500) & req["error_code"].isin(OOM_ERROR_CODES)]
            counts["5xx out_of_memory responses"] = len(bad)
            evidence["oom_responses"] = bad["request_id"].head(5).tolist()
        if signals.gpu_memory:
            s = record.samples.dropna(subset=["gpu_mem_used_bytes", "gpu_mem_total_bytes"])
            if len(s):
                fraction = s["gpu_mem_used_bytes"] / s["gpu_mem_total_bytes"]
                over = s[fraction > limits["max_gpu_mem_fraction"]]
                counts["GPU samples over capacity"] = len(over)
                peak = fraction.idxmax()
                evidence["gpu_peak"] = {"t_s": s.at[peak, "t_s"], "fraction": fraction[peak]}
        if not counts:
            return GateResult.not_measurable(
                self.name, "no OOM witness: engine events, client requests and GPU samples are all absent")
        total = sum(counts.values())
        evidence["counts"] = counts
        explanation = "OOMs: " + ", ".join(f"{what} {n}" for what, n in counts.items())
        return GateResult.judged(self.name, [Measurement("max_oom", total, limits["max_oom"], Unit.COUNT)],
                                 explanation, evidence)
