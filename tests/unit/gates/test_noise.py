"""The one noise model: estimates of one run, differences of runs, Student's t at its level."""

from __future__ import annotations

import numpy as np
import pytest

from gates.noise import (
    NOISE_Z,
    Estimate,
    bootstrap_estimate,
    count_estimate,
    difference,
    ratio_estimate,
    share_estimate,
    t_quantile,
    z_quantile,
)
from record.query import percentile


def test_students_t_at_the_one_level():
    assert t_quantile(2) == pytest.approx(4.303, abs=0.002)
    assert t_quantile(10) == pytest.approx(2.228, abs=0.002)
    assert t_quantile(1000) == pytest.approx(NOISE_Z, abs=0.01)


def test_a_bootstrap_is_seeded_and_a_timeout_percentile_has_no_variance():
    values = np.random.default_rng(1).exponential(100, 300)
    a, b = (bootstrap_estimate(values, lambda r: percentile(r, 95)) for _ in range(2))
    assert a == b and a.sampling_var > 0
    assert bootstrap_estimate(np.array([1.0, np.inf, np.inf]), lambda r: percentile(r, 95)) is None
    assert ratio_estimate([1, 2], [0, 0]) is None


def test_per_run_values_need_two_degrees_of_freedom():
    one = [Estimate(1.0)]
    assert difference(one, one) is None  # one run each, no sampling variance: no noise model
    assert difference([Estimate(10)], [Estimate(1), Estimate(2)]) is None  # 1 degree of freedom
    d = difference([Estimate(10)], [Estimate(1), Estimate(2), Estimate(3)])
    # t(2) × s (1) × sqrt(1 + 1/3)
    assert d.delta == 8 and d.noise == pytest.approx(4.303 * (4 / 3) ** 0.5, abs=0.01) and d.beyond_noise


def test_sampling_variance_is_a_floor_under_the_repeats_spread():
    same = [Estimate(100.0, 25.0)] * 3
    d = difference([Estimate(112.0, 25.0)], same)  # σ 5: noise 1.96 × 5 × sqrt(4/3) ≈ 11.3
    assert d.beyond_noise and d.sigma == 5.0
    spread = [Estimate(90.0, 25.0), Estimate(100.0, 25.0), Estimate(110.0, 25.0)]
    assert not difference([Estimate(112.0, 25.0)], spread).beyond_noise  # s = 10 wins over 5


def test_shares_and_counts():
    assert share_estimate(1.0, 5).sampling_var > 0  # 5 of 5 is not certain
    assert count_estimate(4).sampling_var == 4
    d = difference([count_estimate(0)] * 3, [count_estimate(0)] * 3)
    assert d is not None and not d.beyond_noise


def test_repeats_needed_follow_the_spread():
    d = difference([Estimate(10.0, 4.0)], [Estimate(10.0, 4.0)])
    # NOISE_Z × 2 × sqrt(2/n) < 1  <=>  n > 2 × (1.96 × 2)² ≈ 30.7
    assert d.repeats_needed(1.0) == 31 and d.repeats_needed(0.0) is None


def test_a_family_of_comparisons_shares_the_one_level():
    # 25 metrics in one verdict: each at 5 %/25 (Bonferroni), so the verdict errs once in twenty
    assert z_quantile() == pytest.approx(NOISE_Z, abs=1e-6)
    assert z_quantile(25) == pytest.approx(3.090, abs=0.002)
    assert t_quantile(2, 25) == pytest.approx(22.33, abs=0.02)
    one, many = (difference([Estimate(112.0, 25.0)], [Estimate(100.0, 25.0)] * 3, family=f) for f in (1, 25))
    assert one.beyond_noise and not many.beyond_noise
