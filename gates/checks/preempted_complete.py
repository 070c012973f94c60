"""preempted_complete: preemption delays work, it does not lose it (≥ 99 % finally complete).

A preempted request completes when its last `finished` event says `stop` or `length`. One the
client cancelled on purpose is left out (intended cancels are not failures); one the client gave
up on (status `timeout`) counts as lost, as does one that never finished. One whose worker died
before it finished (a fleet under a replica kill: `worker_died` after its admission there) is
left out too: the kill lost it, not the preemption, and `replica_kill` judges that.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.routing import released_by_death
from gates.sources import Source
from record.query import engine_ids, events_of
from record.run_record import RunRecord

COMPLETED_REASONS = ("stop", "length")


class PreemptedCompleteGate:
    name = "preempted_complete"
    sources = (Source.ENGINE_EVENTS,)
    title = "Preempted requests complete"
    metrics = {"min_completed_fraction": "share of preempted requests that finally complete"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if not record.meta.signals.engine_events:
            return GateResult.not_measurable(self.name, "no engine events: preemptions are unknown")
        preempted = set(events_of(record, "preempted")["request_id"].dropna())
        if not preempted:
            return GateResult.not_measurable(self.name, "no request was preempted in this run")
        finished = events_of(record, "finished").sort_values("t_s").groupby("request_id")["reason"].last()
        client_status = dict(zip(engine_ids(record.requests), record.requests["status"]))
        lost: dict[str, str] = {}
        num_judged = 0
        killed = set(released_by_death(record).index) - set(finished.index)
        for rid in sorted(preempted):
            reason = finished.get(rid, "never finished")
            if (reason == "cancelled" and client_status.get(rid) != "timeout") or rid in killed:
                continue
            num_judged += 1
            if reason not in COMPLETED_REASONS:
                lost[rid] = reason
        if not num_judged:
            return GateResult.not_measurable(self.name, "every preempted request was cancelled by its client")
        fraction = 1.0 - len(lost) / num_judged
        evidence = {
            "num_preempted": num_judged,
            "num_lost": len(lost),
            "lost": [{"request_id": rid, "end": why} for rid, why in list(lost.items())[:5]],
        }
        explanation = f"{num_judged - len(lost)} of {num_judged} preempted requests completed"
        if lost:
            rid, why = next(iter(lost.items()))
            explanation += f"; lost e.g. {rid} ({why})"
        return GateResult.judged(
            self.name,
            [
                Measurement(
                    "min_completed_fraction", fraction, limits["min_completed_fraction"], Unit.FRACTION, is_max=False
                )
            ],
            explanation,
            evidence,
        )
