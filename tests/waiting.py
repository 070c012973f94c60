"""Waiting for a state a test needs: poll until it holds, under a generous bound.

The bound only keeps a broken build from hanging the suite; it is never the thing a test checks
(the suite must pass on a busy machine), so callers give the state they wait for, not a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    state: Callable[[], T],
    what: str,
    *,
    bound_s: float = 60.0,
    every_s: float = 0.05,
    alive: Callable[[], bool] = lambda: True,
) -> T:
    """The first truthy value `state()` returns. Fails when `alive()` turns false (what we wait
    on died, so it never will) or after `bound_s`, naming `what` did not happen."""
    deadline = time.monotonic() + bound_s
    while True:
        value = state()
        if value:
            return value
        if not alive():
            raise AssertionError(f"{what}: what we waited on stopped")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {bound_s:g} s")
        time.sleep(every_s)
