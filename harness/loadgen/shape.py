"""`StepLoadShape`: locust's adapter for the step-load plan (ramp.py).

It ramps users step by step and watches the run's rejections (the request log counts HTTP 429s
as they arrive, also forwarded from workers); once they begin, it holds that level for
`--kvgate-step-hold-s` and stops the test. It drives a run only when the StepLoad user class
was chosen (plugin.step_shape_wanted); `-t/--run-time` caps it too.
"""

from __future__ import annotations

import time
from typing import ClassVar

from locust import LoadTestShape

from harness.loadgen.plugin import context_of
from harness.loadgen.ramp import StepRamp


class StepLoadShape(LoadTestShape):
    is_step_load: ClassVar[bool] = True
    use_common_options: ClassVar[bool] = True
    """The shape reads -t/--run-time itself (locust does not cap a shape run with it); -u/-r are
    left to a mixed run, where this shape is dropped: the ramp uses the step options."""

    def __init__(self) -> None:
        super().__init__()
        self.started_unix = time.time()

    def reset_time(self) -> None:
        super().reset_time()
        self.started_unix = time.time()

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        ctx = context_of(self.runner.environment)
        s = ctx.settings
        ramp = StepRamp(step_users=s.step_users, step_s=s.step_s, max_users=s.step_max_users, hold_s=s.step_hold_s)
        rejected_unix = ctx.log.first_rejection_unix if ctx.log is not None else None
        first_rejection_s = None if rejected_unix is None else max(0.0, rejected_unix - self.started_unix)
        elapsed_s = self.get_run_time()
        run_time_s = getattr(self.runner.environment.parsed_options, "run_time", None)
        users = None if run_time_s and elapsed_s >= run_time_s else ramp.users(elapsed_s, first_rejection_s)
        return None if users is None else (users, float(s.step_users))
