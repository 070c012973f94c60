"""no_oom: nothing ran out of memory — zero OOM in the pressure window, because an OOM fails the
whole running batch, not the one request that asked for more (docs/background.md).

Witnesses, each used when the record has it (the result's `sources` names those it had):

    engine oom events      an allocation failed (kvgate's engine)
    client 5xx             with code `out_of_memory` (or `oom`); on a target without engine
                           events, any 5xx that is not a refusal for overload
                           (`record.query.overload_refusals`): vLLM, SGLang and llama.cpp never
                           name an OOM, they answer a bare 500
    GPU samples            GPU memory over capacity (NVML)
    engine restarts        from outside: the scraped process start time changed, or /health failed
                           (and came back, or never did): an engine that runs out of memory
                           mostly dies; each witness counts the restarts it saw and the larger
                           count is taken, since both may see the same restart (per replica of
                           a fleet, then summed: `record.query.num_restarts`). An engine with
                           its own events names its OOMs there, and each death with its cause
                           (`worker_died`): its restarts are evidence, not counted
    the target's log       `log_match` events of kind `oom` (--target-log;
                           harness/collectors/log_patterns.py)

The whole run is counted, which includes the pressure window and is never weaker. Preemptions
(the preemption counter's change over the run) and the log's pressure lines (a retry with a
smaller batch, a retraction) are the engine coping with pressure, not OOMs: they are reported
beside the count and never added to it.

The client's witness can show an OOM but not its absence, so a run whose only witness is the
client, with none found, is "not measurable" — never a pass on a server that could not have
said so. The preemption counter alone cannot show an absence either.
"""

from __future__ import annotations

from typing import Any

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.outcomes import OOM_ERROR_CODES
from record.query import counter_change, events_of, num_restarts, overload_refusals
from record.run_record import RunRecord


class NoOomGate:
    name = "no_oom"
    sources = (
        Source.ENGINE_EVENTS,
        Source.GPU_MEMORY,
        Source.ENGINE_RESTARTS,
        Source.TARGET_LOG,
        Source.CLIENT_REQUESTS,
        Source.PREEMPTIONS,
    )
    title = "Zero OOM"
    metrics = {
        "max_oom": "OOMs allowed: engine oom events + 5xx out_of_memory responses (any 5xx but an overload refusal "
        "without engine events) + samples over GPU capacity + engine restarts + OOM lines in the target's log",
        "max_gpu_mem_fraction": "GPU memory used / total above which a sample counts as over capacity",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        signals, meta = record.meta.signals, record.meta
        counts: dict[str, int] = {}
        evidence: dict[str, Any] = {}
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
        if Source.ENGINE_RESTARTS.is_in(meta):
            restarts = events_of(record, "engine_restart")
            evidence["restarts"] = restarts[["t_s", "reason", "latency_s", "replica"]].head(5).to_dict("records")
            if signals.engine_events:  # the engine names its OOMs, and each death with its cause (worker_died)
                evidence["restarts_not_counted"] = num_restarts(restarts)
            else:
                counts["engine restarts (possible OOM)"] = num_restarts(restarts)
        if Source.TARGET_LOG.is_in(meta):
            lines = events_of(record, "log_match")
            is_oom = lines["mode"] == "oom"
            counts["OOM lines in the target's log"] = int(is_oom.sum())
            evidence["log_oom"] = lines.loc[is_oom, ["t_s", "reason"]].head(5).to_dict("records")
            evidence["log_pressure"] = lines.loc[~is_oom, "reason"].value_counts().to_dict()
        pressure = _preemptions(record)
        if pressure is not None:
            evidence["preemptions"] = pressure
        if not counts:
            return GateResult.not_measurable(
                self.name,
                "no OOM witness: engine events, client requests, GPU samples, restarts and the target's log "
                "are all absent",
                evidence,
            )
        can_show_none = (
            signals.engine_events
            or signals.gpu_memory
            or any(s.is_in(meta) for s in (Source.ENGINE_RESTARTS, Source.TARGET_LOG))
        )
        if not can_show_none and not sum(counts.values()):
            return GateResult.not_measurable(
                self.name,
                "only the client could witness an OOM, and the target names none: no engine events, GPU "
                "samples, restart watch or target log (--target-log) to show there was none",
                evidence,
            )
        total = sum(counts.values())
        evidence["counts"] = counts
        explanation = "OOMs: " + ", ".join(f"{what} {n}" for what, n in counts.items())
        if pressure:
            explanation += f"; pressure, not counted: {pressure} preemptions"
        return GateResult.judged(
            self.name, [Measurement("max_oom", total, limits["max_oom"], Unit.COUNT)], explanation, evidence
        )


def _preemptions(record: RunRecord) -> int | None:
    """The preemption counter's change over the run, from outside (None: no counter)."""
    if not Source.PREEMPTIONS.is_in(record.meta):
        return None
    change = counter_change(record.meta, "num_preemptions")
    return None if change is None else int(change)
