"""The router's event log: its own events and every worker's, on one cursor.

The router writes `worker_died` and `reservation_released` itself; worker events are pulled
from each worker's `/admin/events` by cursor (`WorkerEventPuller`), re-timed from the worker's
engine clock to the router's (both clocks are tied to unix time by their
`engine_clock_offset_unix`) and tagged with the worker id. A restarted worker starts a new
log, so its cursor starts again at 0. Events are in arrival order per worker; sort by `t_s`
for one global order. A worker killed with -9 loses the events it made since the last pull
(at most one pull interval); the router's own `worker_died` event always survives.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import httpx

from record.events import EVENT_COLUMNS, WORKER_EVENT_COLUMNS, Event, EventKind
from reference_engine.core.event_log import EventLog

log = logging.getLogger("kvgate.router")

MERGED_COLUMNS = WORKER_EVENT_COLUMNS
_PAGE = 20_000


class MergedEventLog:
    """An `EventLog` plus the worker of each event (None: the router's own). Same ring, same cursor."""

    def __init__(self, capacity: int = 1_000_000) -> None:
        self.log = EventLog(capacity)
        self._workers: deque[int | None] = deque(maxlen=capacity)

    def emit(self, t_s: float, kind: EventKind, *, worker: int | None = None, **columns) -> None:
        self.log.emit(t_s, kind, **columns)
        self._workers.append(worker)

    def add(self, event: Event, worker: int | None) -> None:
        """Another log's event, as it was (its time on this log's clock)."""
        columns = event.to_row()
        del columns["seq"], columns["t_s"], columns["kind"]
        self.emit(event.t_s, event.kind, worker=worker, **columns)

    def page(self, since: int, limit: int) -> tuple[list[list], int, int]:
        """(rows in MERGED_COLUMNS order, next cursor, missed)."""
        page = self.log.since(since, limit)
        oldest = self.log.next_cursor - len(self.log)
        workers = self._workers
        rows = [[*e.to_row().values(), workers[e.seq - oldest]] for e in page.events]
        return rows, page.next_cursor, page.missed


@dataclass
class _Cursor:
    incarnation: int = 0
    cursor: int = 0


class WorkerEventPuller:
    """Pulls new events of each worker into a `MergedEventLog`."""

    def __init__(self, events: MergedEventLog, router_offset_unix: float, admin_key: str, num_workers: int) -> None:
        self.events = events
        self.router_offset_unix = router_offset_unix
        self._headers = {"authorization": f"Bearer {admin_key}"}
        self._cursors = [_Cursor() for _ in range(num_workers)]

    async def pull(self, client: httpx.AsyncClient, worker: int, incarnation: int, timeout: httpx.Timeout) -> None:
        c = self._cursors[worker]
        if c.incarnation != incarnation:
            c.incarnation, c.cursor = incarnation, 0
        while True:
            resp = await client.get(
                "/admin/events", params={"since": c.cursor, "limit": _PAGE}, headers=self._headers, timeout=timeout
            )
            resp.raise_for_status()
            page = resp.json()
            if c.incarnation != incarnation:  # the worker was replaced while we waited
                return
            if page["missed"]:
                log.warning(
                    "worker %d: %d events dropped from its ring before the router read them", worker, page["missed"]
                )
            shift = page["engine_clock_offset_unix"] - self.router_offset_unix
            for row in page["rows"]:
                columns = dict(zip(EVENT_COLUMNS, row[: len(EVENT_COLUMNS)], strict=True))
                del columns["seq"]
                t_s, kind = columns.pop("t_s") + shift, EventKind(columns.pop("kind"))
                self.events.emit(t_s, kind, worker=worker, **columns)
            c.cursor = page["next_cursor"]
            if len(page["rows"]) < _PAGE:
                return
