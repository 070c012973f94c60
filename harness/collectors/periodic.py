"""A daemon thread that calls one function at a fixed interval, until stopped.

Ticks are scheduled on a fixed grid (start + k × interval), so a slow call delays the next tick
but does not shift the ones after it; a tick that falls behind by a whole interval is skipped
rather than fired in a burst. An exception in the function is logged and counted, never fatal:
one failed scrape must not end a run. `stop()` runs one final call, so the last state is seen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("kvgate.collectors")


class Periodic:
    def __init__(self, name: str, interval_s: float, fn: Callable[[], None]) -> None:
        if interval_s <= 0:
            raise ValueError(f"{name}: interval must be positive, got {interval_s}")
        self.name = name
        self.interval_s = interval_s
        self.fn = fn
        self.num_calls = 0
        self.num_errors = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kvgate-{name}", daemon=True)

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def stop(self, *, final_call: bool = True) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if final_call:
            self._call()

    def _run(self) -> None:
        next_s = time.monotonic()
        while not self._stop.is_set():
            self._call()
            next_s += self.interval_s
            now = time.monotonic()
            if next_s < now:  # fell behind: skip the missed ticks
                next_s = now + self.interval_s - (now - next_s) % self.interval_s
            self._stop.wait(next_s - now)

    def _call(self) -> None:
        try:
            self.fn()
        except Exception as err:  # a collector failure is logged and counted, never fatal
            self.num_errors += 1
            self.last_error = f"{type(err).__name__}: {err}"
            log.warning("%s failed: %s", self.name, self.last_error)
        self.num_calls += 1
