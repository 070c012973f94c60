"""replica_kill: a replica killed loses only the requests in flight on it.

When one worker of a fleet dies (kill -9, an OOM kill, a crash), the requests it was serving are
lost: they end with a clear `worker_lost` (503, or an SSE error event once streaming). Nothing
else may be: a request on another replica, or one sent after the death, must be served. A
router that ends every stream it relays when one replica dies, or keeps sending to the dead one,
turns one replica's loss into the fleet's.

A request the client saw end with `worker_lost` is *in flight on a killed replica* when the
router's last decision sent it to a worker that died after that decision and no later than the
request ended (give or take `SLACK_S`, the gap between the client's clock and the router's).
Every other one is lost elsewhere, and counted. Not measurable without a router's decisions
(`routed` events) or without a replica that died.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.routing import deaths, final_decisions, not_a_fleet
from gates.sources import Source
from record.run_record import RunRecord

SLACK_S = 1.0
"""How far a client's end time may sit from the router's event times (clocks aligned through
`engine_clock_offset_unix`, and a 503 written after the death is logged)."""


class ReplicaKillGate:
    name = "replica_kill"
    sources = (Source.CLIENT_REQUESTS, Source.ENGINE_EVENTS)
    title = "A replica kill loses only its own requests"
    metrics = {"max_lost_elsewhere": "requests ended worker_lost that were not in flight on a replica that died"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        died = deaths(record)
        routed = final_decisions(record)
        if routed.empty:
            return not_a_fleet(self.name)
        if died.empty:
            return GateResult.not_measurable(self.name, "no replica died during the run")
        requests = record.requests
        lost = requests[requests["error_code"] == "worker_lost"]
        kills = list(zip(died["worker"], died["t_s"]))
        elsewhere: list[str] = []
        for rid, done_s in zip(lost["engine_request_id"], lost["done_s"]):
            decision = routed.loc[rid] if isinstance(rid, str) and rid in routed.index else None
            end = float(done_s) if done_s == done_s else float("inf")  # NaN: it never ended
            if decision is None or not any(
                w == decision["worker"] and decision["t_s"] - SLACK_S <= t <= end + SLACK_S for w, t in kills
            ):
                elsewhere.append(str(rid) if rid == rid else "(no id)")
        measurement = Measurement("max_lost_elsewhere", len(elsewhere), limits["max_lost_elsewhere"], Unit.COUNT)
        explanation = (
            f"{len(died)} replica death(s); {len(lost)} requests lost, {len(lost) - len(elsewhere)} of them in "
            f"flight on the replica that died, {len(elsewhere)} elsewhere"
        )
        if elsewhere:
            explanation += f" (e.g. {elsewhere[0]})"
        evidence = {
            "deaths": [{"worker": int(w), "t_s": float(t)} for w, t in kills],
            "num_lost": len(lost),
            "lost_elsewhere": elsewhere[:10],
        }
        return GateResult.judged(self.name, [measurement], explanation, evidence)
