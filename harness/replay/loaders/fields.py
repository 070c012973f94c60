"""Reading trace rows: typed fields with errors that name the file, the row and the column."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.replay.trace import TraceError


def open_trace(path: Path):
    """Open a trace file for reading text, or say plainly that it is not there."""
    try:
        return open(path, newline="", encoding="utf-8-sig")  # utf-8-sig: tolerate a BOM
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None


def csv_rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(1-based data row, row) for every row of a CSV file whose header has `columns`."""
    with open_trace(path) as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"{path}: the header lacks column(s) {', '.join(missing)} (found: {', '.join(reader.fieldnames or [])})"
            )
        yield from enumerate(reader, start=1)


def int_field(path: Path, row: int, name: str, value: Any, minimum: int = 0) -> int:
    """`value` as an int ≥ `minimum`, or a TraceError naming where it was."""
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: row {row}: {name} must be an integer, got {value!r}") from None
    if out < minimum:
        raise TraceError(f"{path}: row {row}: {name} must be ≥ {minimum}, got {out}")
    return out
