"""The step-load plan: add users step by step until the target starts rejecting, then hold.

A pure function of elapsed time and of when the first rejection (HTTP 429) was seen, so it is
tested without locust; `harness.loadgen.shape.StepLoadShape` is the locust adapter.

    users
    max ┤                 ┌────── hold ──┐ stop        (no rejection: hold at max, then stop)
        │           ┌─────┘
        │     ┌─────┘  ← first 429 here: hold this level for hold_s, then stop
        └─────┘
         step_s
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class StepRamp:
    step_users: int
    step_s: float
    max_users: int
    hold_s: float

    def level(self, elapsed_s: float) -> int:
        """Users of the step in progress at `elapsed_s`, ignoring rejections."""
        return min(self.max_users, self.step_users * (1 + math.floor(elapsed_s / self.step_s)))

    @property
    def full_at_s(self) -> float:
        """When the ramp reaches max_users."""
        return self.step_s * (math.ceil(self.max_users / self.step_users) - 1)

    def users(self, elapsed_s: float, first_rejection_s: float | None) -> int | None:
        """Users wanted now; None when the test should stop."""
        if first_rejection_s is not None:
            return None if elapsed_s >= first_rejection_s + self.hold_s else self.level(first_rejection_s)
        if elapsed_s >= self.full_at_s + self.hold_s:
            return None
        return self.level(elapsed_s)
