"""no_orphans: nothing is left holding memory after the run — above all after a worker kill.

Two witnesses, used when present:
  - `meta.final` after the run drained: `reservations_outstanding` (reservations with no live
    request) and `orphan_blocks` (blocks held by no request and no retained state);
  - the event log around each `worker_died`: every request in flight on the dead worker
    (admitted there before the death, not finished before it) must see its reservation
    released (`reservation_released` or `finished`) afterwards.
`orphan_reconciled` events are reported as evidence: the periodic check found and freed
orphans, which the final state then no longer shows.
"""

from __future__ import annotations

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import events_of
from record.run_record import RunRecord


class NoOrphansGate:
    name = "no_orphans"
    sources = (Source.ENGINE_EVENTS,)
    title = "No orphan reservations"
    metrics = {
        "max_orphan_reservations": "reservations outstanding after drain + dead-worker requests never released",
        "max_orphan_blocks": "blocks held by no request and no retained state after drain",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        final = record.meta.final
        deaths = events_of(record, "worker_died") if record.meta.signals.engine_events else record.events.iloc[0:0]
        stranded = _stranded_by_deaths(record, deaths)
        measurements, found = [], []
        if "reservations_outstanding" in final or len(deaths):
            reservations = int(final.get("reservations_outstanding", 0)) + len(stranded)
            measurements.append(
                Measurement("max_orphan_reservations", reservations, limits["max_orphan_reservations"], Unit.COUNT)
            )
            found.append(f"{reservations} orphan reservations")
        if "orphan_blocks" in final:
            measurements.append(
                Measurement("max_orphan_blocks", int(final["orphan_blocks"]), limits["max_orphan_blocks"], Unit.COUNT)
            )
            found.append(f"{int(final['orphan_blocks'])} orphan blocks")
        if not measurements:
            return GateResult.not_measurable(
                self.name, "no final state (reservations_outstanding, orphan_blocks) and no worker kill in the record"
            )
        reconciled = events_of(record, "orphan_reconciled")
        evidence = {
            "final": {k: final[k] for k in ("reservations_outstanding", "orphan_blocks", "live_blocks") if k in final},
            "worker_deaths": [{"t_s": t, "worker": w} for t, w in zip(deaths["t_s"], _worker_ids(deaths))],
            "stranded_requests": stranded[:5],
            "orphan_blocks_reconciled": float(reconciled["num_blocks"].sum()),
        }
        kills = f" after {len(deaths)} worker kill(s)" if len(deaths) else ""
        explanation = " and ".join(found) + kills
        if stranded:
            explanation += f"; {len(stranded)} requests on a dead worker never released (e.g. {stranded[0]})"
        return GateResult.judged(self.name, measurements, explanation, evidence)


def _stranded_by_deaths(record: RunRecord, deaths: pd.DataFrame) -> list[str]:
    """Requests in flight on a worker when it died whose reservation was never released."""
    events = record.events
    # A release at any time counts: a request that finished just before the kill has its router
    # `reservation_released` before the death, while the worker's own `finished` event may have
    # died with the worker (it is pulled by cursor, docs/server.md).
    released = set(events.loc[events["kind"].isin(("reservation_released", "finished")), "request_id"].dropna())
    stranded: list[str] = []
    for worker, t_death in zip(_worker_ids(deaths), deaths["t_s"]):
        before = events[events["t_s"] <= t_death]
        on_worker = before[before["worker"] == worker]
        admitted = set(on_worker.loc[on_worker["kind"] == "admitted", "request_id"].dropna())
        stranded += sorted(admitted - released)
    return stranded


def _worker_ids(deaths: pd.DataFrame) -> pd.Series:
    """The dead worker of each `worker_died` event (its `worker` column)."""
    return deaths["worker"]
