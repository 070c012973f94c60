"""Every replica of a fleet, read at once: one tick scrapes them all, side by side in time.

    fleet = FleetCollectors(specs, api_key=key)
    fleet.start()
    tick = fleet.sample(t_s)          # each replica's row (replica_samples.csv), the fleet's (samples.csv)
    events = fleet.poll_health(t_s)   # and fleet.poll_log(t_s): engine_restart / log_match, by replica
    initial = fleet.before_load()     # meta.initial of the fleet: its replicas' summed (record/fleet.py)
    final = fleet.after_drain()       # meta.final: the same, after the drain, with the run's counters
    fleet.rows(); fleet.statuses()    # replicas.csv; meta.collectors and meta.replica_collectors

A tick scrapes the replicas in parallel (a thread each), waits for them at most `wait_s`, and
stamps every row with the tick's time, so a fleet row sums figures taken together. A replica
that failed, or has not answered in time, gets a row saying so (MISSING_SOURCE) and the gates
judge that window as not measurable (gates/fleet.py); a replica that hangs is asked again only
once its last scrape is over, and never holds up the others' ticks. Its late answer still
counts (its counters, its start time), its figures do not: they belong to no tick. The fleet's
row exists only at a tick every replica answered: a sum short of a replica is not the fleet's
usage (record/fleet.py `fleet_state`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.collectors.llamacpp_slots import DEFAULT_LAYOUT, KvLayout
from harness.collectors.replica import Reading, ReplicaCollectors
from harness.collectors.replica_spec import ReplicaSpec
from harness.collectors.tenant_estimate import PoolCapacity, scraped_pool
from record.fleet import fleet_state, summed_samples
from record.run_record import MISSING_SOURCE, CollectorStatus

T = TypeVar("T")
FLEET_SOURCE = "fleet"
"""samples.csv `source` of the fleet's rows: its replicas' scrapes of one tick, summed."""
MIN_WAIT_S = 2.0
"""The least a tick waits for a replica's scrape: a busy CPU server's /metrics has taken 0.3–1 s."""


@dataclass
class FleetTick:
    replica_rows: list[dict[str, Any]] = field(default_factory=list)
    fleet_row: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)


class FleetCollectors:
    """Owns one ReplicaCollectors per replica and the threads that read them together."""

    def __init__(
        self,
        specs: Sequence[ReplicaSpec],
        *,
        api_key: str = "",
        llamacpp_kv: KvLayout = DEFAULT_LAYOUT,
        wait_s: float = MIN_WAIT_S,
    ) -> None:
        assert specs, "a fleet has replicas"
        self.replicas = [ReplicaCollectors(spec, api_key=api_key, llamacpp_kv=llamacpp_kv) for spec in specs]
        self.wait_s = wait_s
        self._pool = ThreadPoolExecutor(max_workers=2 * len(specs), thread_name_prefix="kvgate-replica")
        self._reading: dict[int, Future[Reading]] = {}  # a scrape in flight per replica, by index

    def _each(self, fn: Callable[[ReplicaCollectors], T]) -> list[T]:
        """`fn` on every replica at once, results in the replicas' order."""
        return list(self._pool.map(fn, self.replicas))

    def start(self) -> None:
        for replica in self.replicas:
            replica.start()

    def sample(self, t_s: float) -> FleetTick:
        """One tick (module docstring). Only the samples thread calls it."""
        tick = FleetTick()
        for i, future in list(self._reading.items()):  # late answers of earlier ticks: their events only
            if future.done():
                tick.events += future.result().events
                del self._reading[i]
        asked = [i for i in range(len(self.replicas)) if i not in self._reading]
        for i in asked:
            self._reading[i] = self._pool.submit(self.replicas[i].read, t_s)
        wait([self._reading[i] for i in asked], timeout=self.wait_s)
        for i, replica in enumerate(self.replicas):
            future = self._reading[i]
            reading = future.result() if i in asked and future.done() else None
            if reading is not None:
                tick.events += reading.events
                del self._reading[i]
            why = "still answering an earlier scrape" if i not in asked else f"no answer within {self.wait_s:g} s"
            row = replica.tick_row(t_s, reading, why)
            if row is not None:
                tick.replica_rows.append(row)
        answered = [row for row in tick.replica_rows if row["source"] != MISSING_SOURCE]
        if len(answered) == len(self.replicas):
            summed = summed_samples(answered)
            tick.fleet_row = {**summed, "t_s": t_s, "source": FLEET_SOURCE}
        return tick

    def poll_health(self, t_s: float) -> list[dict[str, Any]]:
        return [event for events in self._each(lambda r: r.poll_health(t_s)) for event in events]

    def poll_log(self, t_s: float) -> list[dict[str, Any]]:
        return [event for r in self.replicas for event in r.poll_log(t_s)]

    @property
    def has_logs(self) -> bool:
        return any(r.log_tail is not None for r in self.replicas)

    def finish(self, t_s: float) -> list[dict[str, Any]]:
        return [event for r in self.replicas for event in r.finish(t_s)]

    def before_load(self) -> dict[str, Any]:
        return fleet_state(self._each(ReplicaCollectors.before_load))

    def after_drain(self) -> dict[str, Any]:
        return fleet_state(self._each(ReplicaCollectors.after_drain))

    def in_flight(self) -> int | None:
        """Requests the replicas hold, from their last scrapes; None when one cannot say."""
        held = []
        for r in self.replicas:
            g = r.last.gauges if r.last is not None else {}
            if "num_running" not in g:
                return None
            held.append(g["num_running"] + g.get("num_waiting", 0.0))
        return int(sum(held))

    def stated_pool(self) -> PoolCapacity | None:
        """The fleet's pool, when every replica states its own in the same block size."""
        pools = [scraped_pool(r.stated) for r in self.replicas]
        if any(p is None for p in pools) or len({p.block_tokens for p in pools if p is not None}) != 1:
            return None
        first = pools[0]
        assert first is not None
        return PoolCapacity(sum(p.num_blocks for p in pools if p is not None), first.block_tokens, first.source)

    def rows(self) -> list[dict[str, Any]]:
        return [r.row() for r in self.replicas]

    def replica_statuses(self) -> dict[str, dict[str, CollectorStatus]]:
        """meta.replica_collectors."""
        return {r.spec.name: r.statuses() for r in self.replicas}

    def statuses(self) -> dict[str, CollectorStatus]:
        """meta.collectors for the fleet: a source is available when it was on every replica."""
        each = self.replica_statuses()
        names = dict.fromkeys(name for statuses in each.values() for name in statuses)
        out = {}
        for name in names:
            have = [replica for replica, statuses in each.items() if name in statuses and statuses[name].available]
            lacking = [replica for replica in each if replica not in have]
            detail = f"{len(have)} of {len(each)} replicas" + (f"; not on {', '.join(lacking)}" if lacking else "")
            out[name] = CollectorStatus(available=not lacking, detail=detail)
        return out

    def close(self) -> None:
        for replica in self.replicas:
            replica.close()
        self._pool.shutdown(wait=False)
