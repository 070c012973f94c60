"""A worker's clock offset from pings: exact when the legs are equal, bounded by half the round
trip otherwise, and taken from the fastest ping."""

from __future__ import annotations

import pytest

from harness.loadgen.clock_sync import ClockSample, estimate_offset


def test_equal_legs_give_the_exact_offset() -> None:
    # the worker runs 5 s ahead; each leg takes 1 ms
    assert estimate_offset([ClockSample(100.0, 105.001, 100.002)]).offset_s == pytest.approx(5.0)


def test_the_fastest_ping_is_kept_and_its_error_is_within_half_its_round_trip() -> None:
    samples = [
        ClockSample(100.0, 105.090, 100.100),  # held up 90 ms on the way there: 40 ms off
        ClockSample(200.0, 205.004, 200.005),  # 4 ms there, 1 ms back: 1.5 ms off
        ClockSample(300.0, 305.001, 300.050),  # held up 49 ms on the way back
    ]
    offset = estimate_offset(samples)
    assert offset.round_trip_s == pytest.approx(0.005) and offset.num_samples == 3
    assert abs(offset.offset_s - 5.0) <= offset.round_trip_s / 2


def test_no_sample_no_offset() -> None:
    with pytest.raises(ValueError):
        estimate_offset([])
