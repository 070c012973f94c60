"""The engine's event log: an append-only ring of the events a run record keeps.

The kinds and their columns are the record's (`record.events`); this is only where the engine
writes them. A log keeps at most `capacity` recent events; `since(cursor)` says how many a slow
reader missed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from record.events import Event, EventKind
from reference_engine.request import Request


@dataclass(frozen=True, slots=True)
class EventPage:
    events: list[Event]
    next_cursor: int
    missed: int  # events dropped from the ring before the reader asked for them


class EventLog:
    """Append-only with a monotonically increasing cursor; a bounded ring of recent events.

    Invariant: event `seq` numbers are 0, 1, 2, ... with no gaps; the ring holds the newest
    `capacity` of them. Append is O(1); `since(cursor)` is O(returned).
    """

    def __init__(self, capacity: int = 1_000_000) -> None:
        self._ring: deque[Event] = deque(maxlen=capacity)
        self._next_seq = 0
        self.counts: dict[EventKind, int] = {k: 0 for k in EventKind}

    def emit(self, t_s: float, kind: EventKind, **columns) -> Event:
        event = Event(self._next_seq, t_s, kind, **columns)
        self._next_seq += 1
        self._ring.append(event)
        self.counts[kind] += 1
        return event

    def emit_for(self, t_s: float, kind: EventKind, r: Request, **columns) -> Event:
        """An event about request `r`: its id, tenant and traffic class, and `columns`."""
        return self.emit(
            t_s, kind, request_id=r.request_id, tenant=r.tenant, traffic_class=r.traffic_class.value, **columns
        )

    @property
    def last_t_s(self) -> float | None:
        """The time of the newest event (None before the first): O(1)."""
        return self._ring[-1].t_s if self._ring else None

    @property
    def next_cursor(self) -> int:
        return self._next_seq

    def since(self, cursor: int, limit: int | None = None) -> EventPage:
        oldest = self._next_seq - len(self._ring)
        start = max(cursor, oldest)
        missed = max(0, oldest - cursor)
        stop = self._next_seq if limit is None else min(self._next_seq, start + limit)
        first = start - oldest
        events = [self._ring[i] for i in range(first, first + (stop - start))]
        return EventPage(events, stop, missed)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._ring)

    def __len__(self) -> int:
        return len(self._ring)
