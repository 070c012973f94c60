"""no_oom: nothing ran out of memory — zero OOM in the pressure window, because an OOM fails the
whole running batch, not the one request that asked for more (docs/background.md).

Three independent witnesses, each used when the record has it: engine `oom` events (an
allocation failed), client responses 5xx with code `out_of_memory` (or `oom`), and GPU memory samples over
capacity. The whole run is counted, which includes the pressure window and is never weaker.

The client's witness can show an OOM but not its absence: vLLM, SGLang and llama.cpp never
name one (an engine that runs out of memory answers a bare 500, or dies and restarts behind
its proxy). So on a target without engine events, every 5xx that is not a refusal for overload
(`record.query.overload_refusals`) counts as a possible OOM, and a run whose only witness is the
client, with none found, is "not measurable" — never a pass on a server that could not have
said so.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.outcomes import OOM_ERROR_CODES
from record.query import events_of, overload_refusals
from record.run_record import RunRecord


class NoOomGate:
    name = "no_oom"
    sources = (Source.ENGINE_EVENTS, Source.GPU_MEMORY, Source.CLIENT_REQUESTS)
    title = "Zero OOM"
    metrics = {
        "max_oom": "OOMs allowed: engine oom events + 5xx out_of_memory responses (any 5xx but an overload refusal "
        "without engine events) + samples over GPU capacity",
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
            server_error = req["http_status"] >= 500
            named = req["error_code"].isin(OOM_ERROR_CODES)
            if signals.engine_events:
                bad, what = req[server_error & named], "5xx out_of_memory responses"
            else:
                bad, what = req[server_error & (named | ~overload_refusals(req))], "5xx responses (possible OOM)"
            counts[what] = len(bad)
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
                self.name, "no OOM witness: engine events, client requests and GPU samples are all absent"
            )
        if not (signals.engine_events or signals.gpu_memory) and not sum(counts.values()):
            return GateResult.not_measurable(
                self.name,
                "only the client could witness an OOM, and the target names none: no engine events "
                "or GPU samples to show there was none",
                evidence,
            )
        total = sum(counts.values())
        evidence["counts"] = counts
        explanation = "OOMs: " + ", ".join(f"{what} {n}" for what, n in counts.items())
        return GateResult.judged(
            self.name, [Measurement("max_oom", total, limits["max_oom"], Unit.COUNT)], explanation, evidence
        )
