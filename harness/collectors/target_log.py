"""Tail the target's log during a run for the lines of log_patterns.py (`kvgate run --target-log`).

    tail = LogTail(Path("/var/log/vllm.log"))   # from the end: only what the run makes counts
    rows = tail.poll(t_s)                        # log_match event rows for the new whole lines
    tail.status()                                # meta.collectors["target_log"]

A server's log may carry API keys, prompts and paths, so nothing of a line is kept: a match
becomes an event with the pattern's name and kind and the time kvgate read it (within one tail
interval of its writing; the line's own timestamp has no format common to engines). A log that
is truncated or replaced (rotation) is read again from its start; a partial last line waits for
its end. A file that cannot be opened makes the witness "not available", saying why.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO

from harness.collectors.log_patterns import match_line
from record.events import EventKind
from record.run_record import CollectorStatus

NAME = "target_log"
"""Its key in meta.collectors (and gates.sources.Source.TARGET_LOG's value)."""
MAX_READ_BYTES = 4 * 1024 * 1024
"""Read at most this much per poll: a log that floods is caught up over several ticks."""


class LogTail:
    """Owns one open file and its read position; `num_lines` and `matches` only grow."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.num_lines = 0
        self.matches: Counter[str] = Counter()
        self.error = ""
        self._file: BinaryIO | None = None
        self._inode = 0
        self._partial = b""
        try:
            self._open(at_end=True)
        except OSError as err:
            self.error = f"cannot read {path}: {err.strerror or err}"

    def _open(self, *, at_end: bool) -> None:
        if self._file is not None:
            self._file.close()
        self._file = open(self.path, "rb")  # noqa: SIM115 - held across polls, closed in close()
        self._inode = os.fstat(self._file.fileno()).st_ino
        self._file.seek(0, os.SEEK_END if at_end else os.SEEK_SET)
        self._partial = b""

    def poll(self, t_s: float) -> list[dict[str, Any]]:
        """Event rows for the whole lines written since the last poll that match a pattern."""
        if self._file is None:
            return []
        try:
            self._follow()
            data = self._file.read(MAX_READ_BYTES)
        except OSError:
            return []  # the file is gone for the moment: the next poll looks again
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        self.num_lines += len(lines)
        rows = []
        for raw in lines:
            pattern = match_line(raw.decode("utf-8", errors="replace"))
            if pattern is not None:
                self.matches[pattern.name] += 1
                rows.append(
                    {"t_s": t_s, "kind": EventKind.LOG_MATCH.value, "reason": pattern.name, "mode": pattern.kind}
                )
        return rows

    def _follow(self) -> None:
        """Reopen from the start a log that was rotated (another file) or truncated (shorter)."""
        assert self._file is not None
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return  # rotated away, not yet recreated: finish the old file
        if stat.st_ino != self._inode or stat.st_size < self._file.tell():
            self._open(at_end=False)

    def status(self) -> CollectorStatus:
        if self.error:
            return CollectorStatus(available=False, detail=self.error)
        found = ", ".join(f"{name} {n}" for name, n in sorted(self.matches.items())) or "no OOM or pressure line"
        return CollectorStatus(
            available=True, detail=f"{self.path}: {self.num_lines} lines read during the run; {found}"
        )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
