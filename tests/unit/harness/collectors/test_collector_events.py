from __future__ import annotations

from typing import Any

from harness.collectors import events as events_module
from harness.collectors.events import EventCollector
from record.run_record import RECORD_EVENT_COLUMNS

COLUMNS = list(RECORD_EVENT_COLUMNS)


def event(seq: int, t_s: float, kind: str = "admitted") -> list[Any]:
    return [seq, t_s, kind, f"r{seq}", "acme", "interactive", 1, 5, None, None, None, None, None]


class FakeAdmin:
    """Serves an event log of `num` events whose engine clock started at unix 1000."""

    def __init__(self, rows: list[list[Any]]) -> None:
        self.rows = rows
        self.calls: list[tuple[int, int]] = []

    def events(self, since: int, limit: int) -> dict[str, Any]:
        self.calls.append((since, limit))
        page = self.rows[since : since + limit]
        return {
            "columns": COLUMNS,
            "rows": page,
            "next_cursor": since + len(page),
            "missed": 0,
            "t_s": 99.0,
            "engine_clock_offset_unix": 1000.0,
        }


def test_events_are_re_timed_to_the_run_and_read_by_cursor(monkeypatch) -> None:
    monkeypatch.setattr(events_module, "PAGE", 2)
    admin = FakeAdmin([event(0, 4.0), event(1, 6.0), event(2, 7.5, "first_token"), event(3, 9.0, "worker_died")])
    collector = EventCollector(admin, started_unix=1005.0)  # type: ignore[arg-type]
    rows = collector.poll()
    assert [r["t_s"] for r in rows] == [1.0, 2.5, 4.0]  # the event before the run started is dropped
    assert all(tuple(r) == RECORD_EVENT_COLUMNS for r in rows)
    assert admin.calls == [(0, 2), (2, 2), (4, 2)] and collector.cursor == 4
    assert collector.num_by_kind == {"admitted": 1, "first_token": 1, "worker_died": 1}
    admin.rows.append(event(4, 10.0, "finished"))
    assert [r["kind"] for r in collector.poll()] == ["finished"]
