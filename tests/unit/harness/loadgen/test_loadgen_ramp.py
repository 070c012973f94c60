from __future__ import annotations

from harness.loadgen.ramp import StepRamp

RAMP = StepRamp(step_users=4, step_s=10, max_users=10, hold_s=5)


def test_users_grow_one_step_at_a_time_up_to_the_maximum() -> None:
    assert [RAMP.users(t, None) for t in (0, 9.9, 10, 20, 24.9)] == [4, 4, 8, 10, 10]
    assert RAMP.full_at_s == 20


def test_without_rejections_the_test_stops_after_holding_the_maximum() -> None:
    assert RAMP.users(24.9, None) == 10 and RAMP.users(25, None) is None


def test_after_the_first_rejection_the_level_is_held_then_the_test_stops() -> None:
    assert RAMP.users(13, first_rejection_s=12) == 8
    assert RAMP.users(16.9, first_rejection_s=12) == 8
    assert RAMP.users(17, first_rejection_s=12) is None
