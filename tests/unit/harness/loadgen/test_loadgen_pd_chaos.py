"""The P/D link chaos schedule: every change it makes is one the pair accepts, and undone."""

from __future__ import annotations

from harness.loadgen.pd_chaos import RESTORE, SCHEDULE
from reference_engine.server.pd_chaos import PdChaosRequest


def test_every_step_is_one_change_the_pair_accepts_and_the_cycle_ends_chaos_free():
    state: dict = {}
    for step in SCHEDULE:
        change = PdChaosRequest.model_validate(step.body).model_dump(exclude_none=True)
        assert len(change) == 1, step
        if "kill_prefill" not in change:  # a kill is once, nothing to undo
            state.update(change)
    assert (
        state
        == PdChaosRequest.model_validate(RESTORE[0]).model_dump(exclude_none=True)
        == {
            "cancel_every": 0,
            "link_slowdown": 1.0,
            "failure_rate": 0.0,
        }
    )
