"""Clocks: the only place the engine learns what time it is.

The engine core never reads the wall clock; it is handed a `Clock`. Live serving uses
`MonotonicClock`; replay and tests use `VirtualClock`, which moves only when told to, so a
59-minute trace runs in seconds and every test is deterministic.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on this clock's own monotonic time line."""
        ...


class MonotonicClock:
    """Real time from `time.monotonic()`, shifted so that it starts near zero."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin


class VirtualClock:
    """A clock that only moves forward when `advance` or `advance_to` is called."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = start_s

    def now(self) -> float:
        return self._now

    def advance(self, delta_s: float) -> float:
        if delta_s < 0:
            raise ValueError(f"a clock cannot go backwards (delta {delta_s} s)")
        self._now += delta_s
        return self._now

    def advance_to(self, t_s: float) -> float:
        """Move to `t_s` if it lies ahead; a time in the past leaves the clock where it is."""
        if t_s > self._now:
            self._now = t_s
        return self._now
