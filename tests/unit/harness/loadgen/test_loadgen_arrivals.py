"""Arrival schedules: counts, reproducibility by seed, mean rates over many samples."""

from __future__ import annotations

import itertools

import pytest

from harness.loadgen.arrivals import ArrivalKind, Arrivals, arrival_kind
from record.errors import KvgateError, UnknownNameError


def test_constant_sends_rate_times_duration_evenly() -> None:
    times = list(Arrivals(kind=ArrivalKind.CONSTANT, rate_per_s=4.0).times(duration_s=10.0))
    assert len(times) == 40
    assert times[0] == 0.0 and times[1] == pytest.approx(0.25) and times[-1] < 10.0


@pytest.mark.parametrize("kind", list(ArrivalKind))
def test_same_seed_same_times_other_seed_other_times(kind: ArrivalKind) -> None:
    def times(seed: int) -> list[float]:
        return list(Arrivals(kind=kind, rate_per_s=5.0, seed=seed).times(duration_s=20.0))

    assert times(3) == times(3)
    if kind is not ArrivalKind.CONSTANT:
        assert times(3) != times(4)


@pytest.mark.parametrize("kind", [ArrivalKind.POISSON, ArrivalKind.BURSTS])
def test_mean_rate_over_many_arrivals(kind: ArrivalKind) -> None:
    times = list(Arrivals(kind=kind, rate_per_s=50.0, seed=1, burst_size=5).times(duration_s=2000.0))
    assert len(times) / 2000.0 == pytest.approx(50.0, rel=0.03)
    assert times == sorted(times) and all(0.0 <= t < 2000.0 for t in times)


def test_poisson_gaps_are_memoryless() -> None:
    """Exponential gaps: their standard deviation equals their mean."""
    times = list(Arrivals(kind=ArrivalKind.POISSON, rate_per_s=10.0, seed=2).times(duration_s=5000.0))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = sum(gaps) / len(gaps)
    std = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert mean == pytest.approx(0.1, rel=0.03) and std == pytest.approx(mean, rel=0.05)


def test_bursts_arrive_together_in_groups_of_burst_size() -> None:
    times = list(
        Arrivals(kind=ArrivalKind.BURSTS, rate_per_s=8.0, seed=0, burst_size=4).times(
            duration_s=1000.0, max_requests=400
        )
    )
    groups = [len(list(g)) for _, g in itertools.groupby(times)]
    assert len(times) == 400 and groups == [4] * 100


def test_max_requests_bounds_the_count() -> None:
    assert len(list(Arrivals(kind=ArrivalKind.POISSON, rate_per_s=100.0).times(duration_s=60.0, max_requests=7))) == 7


def test_bad_rates_and_names_are_errors() -> None:
    with pytest.raises(KvgateError, match="positive"):
        Arrivals(kind=ArrivalKind.CONSTANT, rate_per_s=0.0)
    with pytest.raises(UnknownNameError, match="poisson"):
        arrival_kind("gaussian")
