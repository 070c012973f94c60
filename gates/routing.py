"""What a fleet record says about routing: the router's decisions and its workers' lives.

The reference engine's router logs each decision (`routed`: request, worker, policy, prefix
blocks it expected there), each worker's death (`worker_died`) and each return to service
(`worker_ready`), all on its own clock (record/events.py). The routing gates read them here, the
same way: a request's decision is its last `routed` event (an earlier one was a worker that
could not be reached), and a worker is out of service from its death until it is ready again.
"""

from __future__ import annotations

import math

import pandas as pd

from gates.base import GateResult
from record.query import events_of
from record.run_record import RunRecord

Interval = tuple[float, float]


def decisions(record: RunRecord) -> pd.DataFrame:
    """Every `routed` event (empty: the record has no router's decisions)."""
    return events_of(record, "routed")


def final_decisions(record: RunRecord) -> pd.DataFrame:
    """Each routed request's last decision, indexed by request id."""
    routed = decisions(record)
    return routed.sort_values("t_s").drop_duplicates("request_id", keep="last").set_index("request_id")


def deaths(record: RunRecord) -> pd.DataFrame:
    return events_of(record, "worker_died")


def out_of_service(record: RunRecord) -> dict[int, list[Interval]]:
    """{worker: [(died at, ready again at or inf)]}: when each worker could serve nothing."""
    ready = events_of(record, "worker_ready")
    intervals: dict[int, list[Interval]] = {}
    for worker, t_died in zip(deaths(record)["worker"], deaths(record)["t_s"]):
        back = ready.loc[(ready["worker"] == worker) & (ready["t_s"] > t_died), "t_s"]
        intervals.setdefault(int(worker), []).append((float(t_died), float(back.min()) if len(back) else math.inf))
    return intervals


def not_a_fleet(gate: str) -> GateResult:
    """The routing gates' answer to a record with no router's decision: they judge a fleet behind
    kvgate's router, which this run's target is not (a single engine, another server)."""
    return GateResult.not_measurable(gate, "no routing decisions: not a fleet behind kvgate's router", applies=False)


def released_by_death(record: RunRecord) -> pd.Series:
    """Request id -> when its worker died, for requests admitted on a worker that died after
    admitting them: a killed process frees every block it held, whether or not the events that
    would have said so were read before it died (they are pulled by cursor)."""
    admitted = events_of(record, "admitted").dropna(subset=["request_id", "worker"])
    died = deaths(record)
    if admitted.empty or died.empty:
        return pd.Series(dtype=float)
    freed: dict[str, float] = {}
    for rid, worker, t_admitted in zip(admitted["request_id"], admitted["worker"], admitted["t_s"]):
        later = died.loc[(died["worker"] == worker) & (died["t_s"] >= t_admitted), "t_s"]
        if len(later):
            freed[str(rid)] = float(later.min())
    return pd.Series(freed, dtype=float)
