"""Engine events through /admin/events, by cursor, as run-record rows (RECORD_EVENT_COLUMNS).

Each poll reads every page since the last cursor and re-times each event from the engine clock
to the run's clock. Events from before the run started (an engine that served earlier) are
dropped. `missed` counts events that left the engine's ring before they were read: a reader too
slow for the engine's rate, reported in meta.notes rather than hidden.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.collectors.admin import AdminApi, run_time
from record.run_record import RECORD_EVENT_COLUMNS

PAGE = 20_000


class EventCollector:
    """Owns the cursor. Not thread-safe: one poller calls `poll`."""

    def __init__(self, admin: AdminApi, started_unix: float) -> None:
        self.admin = admin
        self.started_unix = started_unix
        self.cursor = 0
        self.num_missed = 0
        self.num_by_kind: Counter[str] = Counter()

    def poll(self) -> list[dict[str, Any]]:
        """Rows of every event since the last poll (raises AdminUnavailable)."""
        rows: list[dict[str, Any]] = []
        while True:
            page = self.admin.events(self.cursor, PAGE)
            self.num_missed += int(page.get("missed", 0))
            columns = page["columns"]
            for values in page["rows"]:
                row = dict(zip(columns, values))
                row["t_s"] = run_time(row["t_s"], page, self.started_unix)
                if row["t_s"] < 0:
                    continue
                self.num_by_kind[row["kind"]] += 1
                rows.append({c: row.get(c) for c in RECORD_EVENT_COLUMNS})
            self.cursor = int(page["next_cursor"])
            if len(page["rows"]) < PAGE:
                return rows
