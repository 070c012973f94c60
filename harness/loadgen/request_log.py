"""Where outcomes end up in the process that owns the record (locust's master, or the only
process): a CSV of run-record rows, and when the first 429 came back (the step-load shape reads it).

Rows are appended and flushed as they arrive, so a reader (`kvgate run` tails the file for its
progress display) sees them within a second, and a crash keeps what was measured.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from harness.loadgen.outcome import RequestOutcome
from record.run_record import REQUEST_COLUMNS

REJECTED_STATUS = 429


def tally(counts: Counter[str], rows: Iterable[Mapping[str, object]]) -> None:
    """Count rows by status, and 429s apart (the progress display of a live run)."""
    for row in rows:
        counts[str(row["status"])] += 1
        if str(row["http_status"]) == str(REJECTED_STATUS):
            counts[str(REJECTED_STATUS)] += 1


class RequestLog:
    """Writes every outcome as a row when a CSV path was given.

    `first_rejection_unix` is when the first 429 came back (its send time + its duration)."""

    def __init__(self, csv_path: str | Path | None, origin_unix: float) -> None:
        self.origin_unix = origin_unix
        self.first_rejection_unix: float | None = None
        self._file: IO[str] | None = None
        self._writer: csv.DictWriter | None = None
        if csv_path:
            path = Path(csv_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "w", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=REQUEST_COLUMNS)
            self._writer.writeheader()
            self._file.flush()

    def add(self, outcomes: Iterable[RequestOutcome]) -> None:
        rows = []
        for o in outcomes:
            if o.http_status == REJECTED_STATUS and self.first_rejection_unix is None:
                self.first_rejection_unix = o.sent_unix + (o.e2e_s or 0.0)
            rows.append(o.row(self.origin_unix))
        if self._writer is not None and rows:
            self._writer.writerows(rows)
            assert self._file is not None
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None
