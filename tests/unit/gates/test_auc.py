"""ROC AUC of two samples with its Hanley-McNeil interval."""

import random

import pytest

from gates.auc import roc_auc


def test_perfect_separation_is_1_and_its_bound_tightens_with_samples():
    few, many = roc_auc([2.0] * 4, [1.0] * 4), roc_auc([2.0] * 24, [1.0] * 24)
    assert few.value == many.value == 1.0 and few.high == 1.0
    assert 0.85 < few.low < many.low < 1.0  # never certain to the last digit, surer with more


def test_ties_count_half_and_the_auc_is_the_share_of_pairs_ordered():
    assert roc_auc([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).value == 0.5
    assert roc_auc([3.0], [1.0, 2.0, 3.0, 4.0]).value == pytest.approx(2.5 / 4)
    assert roc_auc([1.0] * 5, [2.0] * 5).value == 0.0


def test_two_draws_of_one_distribution_sit_near_a_half_inside_their_interval():
    rng = random.Random(3)
    auc = roc_auc([rng.random() for _ in range(200)], [rng.random() for _ in range(200)])
    assert auc.low < 0.5 < auc.high and auc.high - auc.low < 0.15


def test_an_empty_side_has_nothing_to_judge():
    with pytest.raises(ValueError, match="at least one value"):
        roc_auc([], [1.0])
