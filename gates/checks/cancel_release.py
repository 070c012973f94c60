"""cancel_release: a cancelled request's blocks are back in the pool quickly (P99 ≤ 2 s).

The latency of one cancel is, in order of preference:
  1. the engine's own `blocks_released.latency_s` (cancel_received -> released);
  2. for a cancel the engine received but released without a latency: release t - received t;
  3. for a client cancel the engine never heard of (propagation broken): the time from the
     client's disconnect (`done_s`) to the request's release, whatever the release reason.
A request's `finished` event also marks its release (finishing frees every block it held), and so
does the death of the worker that held it (a fleet under a replica kill: the process's memory
went with it, even when its last events did not reach the record). A cancel whose blocks were
never released counts as infinitely late, so it fails the gate. A
request the engine refused (a 429 before a cancel timer fired) never held a block: there is
nothing to release, so it is no cancel at all, whatever the client meant to do with it.

A target without engine events (vLLM, SGLang, llama.cpp) is judged from its polled request
counts instead (gates/held_requests.py): an upper bound per cancel, to within a poll interval.
The evidence names the source.
"""

from __future__ import annotations

import math

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.held_requests import poll_interval_s, polled_cancel_latencies, polled_counts
from gates.routing import released_by_death
from gates.sources import Source
from record.query import engine_ids, events_of, intended_cancels, percentile
from record.run_record import RunRecord


class CancelReleaseGate:
    name = "cancel_release"
    sources = (Source.ENGINE_EVENTS, Source.PROMETHEUS)
    title = "Cancel → blocks released"
    metrics = {"p99_max_s": "P99 of cancel -> blocks released, seconds"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if record.meta.signals.engine_events:
            latency_s, source = cancel_latencies(record), "engine events"
        elif record.meta.signals.prometheus and not polled_counts(record).empty:
            latency_s, source = polled_cancel_latencies(record), "polled request counts (upper bound)"
        else:
            return GateResult.not_measurable(
                self.name, "no engine events and no polled request counts: release times are unknown"
            )
        if not latency_s:
            return GateResult.not_measurable(self.name, "no request was cancelled in this run")
        series = pd.Series(latency_s)
        p99 = percentile(series, 99)
        never = series[series == math.inf]
        evidence = {
            "source": source,
            "num_cancels": len(series),
            "num_never_released": len(never),
            "worst": [{"request_id": rid, "latency_s": v} for rid, v in series.nlargest(5).items()],
        }
        if source != "engine events":
            evidence["poll_interval_s"] = poll_interval_s(record)
        explanation = f"P99 cancel→release over {len(series)} cancels, from {source}"
        if len(never):
            explanation += f"; {len(never)} never released (e.g. {never.index[0]})"
        return GateResult.judged(
            self.name, [Measurement("p99_max_s", p99, limits["p99_max_s"], Unit.SECONDS)], explanation, evidence
        )


def cancel_latencies(record: RunRecord) -> dict[str, float]:
    """Engine request id -> seconds from cancel to release (inf: never released)."""
    released = events_of(record, "blocks_released")
    release_t = events_of(record, "blocks_released", "finished").groupby("request_id")["t_s"].max()
    release_t = release_t.combine_first(released_by_death(record))
    measured = released.dropna(subset=["latency_s"]).groupby("request_id")["latency_s"].max()
    latency: dict[str, float] = {str(rid): float(v) for rid, v in measured.items()}

    received = events_of(record, "cancel_received").groupby("request_id")["t_s"].min()
    for rid, t_cancel in received.items():
        if rid not in latency:
            latency[rid] = _since(release_t.get(rid), t_cancel)

    requests = record.requests
    cancelled = requests[intended_cancels(requests)]
    admitted = set(events_of(record, "admitted")["request_id"].dropna())
    for rid, t_disconnect in zip(engine_ids(cancelled), cancelled["done_s"]):
        if rid in latency or rid not in admitted or pd.isna(t_disconnect):
            continue  # already measured, or the engine never admitted the request (nothing held)
        latency[rid] = _since(release_t.get(rid), t_disconnect)
    return latency


def _since(t_release: float | None, t_cancel: float) -> float:
    if t_release is None or pd.isna(t_release):
        return math.inf
    return max(0.0, float(t_release) - float(t_cancel))
