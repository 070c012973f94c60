"""An `EngineCore` on a virtual clock of its own, stepped up to a time: the loop a fleet replay's
workers (harness/replay/fleet.py) and a P/D pair's two sides (core/pd.py) share.

    run_until(core, clock, t_s, after_step=tell)   # plans of many steps, none starting at t_s or later

Idle with work waiting, it jumps to the engine's next timer (a queue deadline, a session expiry)
if that comes before `t_s`; the clock ends at `t_s` (when finite) whatever the engine did.
`after_step` is called after every step: a plan ends where a request finishes, so a caller that
must act on a finish (the P/D hand-off) sees it at the step it happened.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from reference_engine.clock import VirtualClock
from reference_engine.core.engine import EngineCore


def run_until(core: EngineCore, clock: VirtualClock, t_s: float, after_step: Callable[[], None] | None = None) -> None:
    """Step `core` until `t_s` or until nothing is left to run before it (module docstring)."""
    while core.has_work() and clock.now() < t_s:
        out = core.step(until_s=t_s)
        if out.idle:
            timer = core.next_timer_s()
            if timer is None or timer >= t_s:
                if after_step is not None:  # an idle step may still have ended a request (its queue deadline)
                    after_step()
                break
            clock.advance_to(timer)
        else:
            clock.advance_to(out.t_end_s)
        if after_step is not None:
            after_step()
    if math.isfinite(t_s) and clock.now() < t_s:
        clock.advance_to(t_s)
