"""The processes a test started, read from /proc (Linux): who descends from whom, who still runs."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then the parent)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir(PROC):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid` now, children before grandchildren."""
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop(0)):
            found.append(child)
            todo.append(child)
    return found


def is_running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")
