"""unhealthy_routing: nothing is routed to a replica after its health timeout.

A replica that died, or hung past the router's health timeout (`server.worker_hang_timeout_s`:
the router then kills it), is out of service until it is ready again. A request routed there in
between waits on a dead port, or is retried elsewhere after a wasted attempt: either way the
router sent work where it knew none could be done. The router logs each replica's death
(`worker_died`, at the death or at the health timeout) and return (`worker_ready`), and each
decision (`routed`), on one clock; every decision for a replica inside one of its out-of-service
intervals is counted. Not measurable without a router's decisions or without a replica that
went out of service.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.routing import decisions, not_a_fleet, out_of_service
from gates.sources import Source
from record.run_record import RunRecord


class UnhealthyRoutingGate:
    name = "unhealthy_routing"
    sources = (Source.ENGINE_EVENTS,)
    title = "Nothing routed to a replica out of service"
    metrics = {"max_routed_to_unhealthy": "routing decisions for a replica between its death and its return"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        routed = decisions(record)
        if routed.empty:
            return not_a_fleet(self.name)
        intervals = out_of_service(record)
        if not intervals:
            return GateResult.not_measurable(self.name, "no replica went out of service during the run")
        bad = [
            str(rid)
            for rid, worker, t in zip(routed["request_id"], routed["worker"], routed["t_s"])
            if any(start <= t < end for start, end in intervals.get(int(worker), ()))
        ]
        measurement = Measurement("max_routed_to_unhealthy", len(bad), limits["max_routed_to_unhealthy"], Unit.COUNT)
        spans = sum(len(v) for v in intervals.values())
        explanation = (
            f"{len(bad)} of {len(routed)} routing decisions sent to a replica out of service ({spans} outage(s))"
        )
        if bad:
            explanation += f", e.g. {bad[0]}"
        evidence = {
            "outages": {str(w): [[s, e] for s, e in v] for w, v in intervals.items()},
            "routed_to_unhealthy": bad[:10],
        }
        return GateResult.judged(self.name, [measurement], explanation, evidence)
