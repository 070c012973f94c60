import math

import pytest

from record.query import percentile


def test_percentile_is_the_nearest_rank_not_one_rank_above_it():
    # of 100 values, P99 is the 99th smallest: one in a hundred may be slower than it
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 99) == 99.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 50) == 50.0
    assert percentile(values, 100) == 100.0


@pytest.mark.parametrize(("n", "q", "rank"), [(20, 95, 19), (21, 95, 20), (5, 95, 5), (1, 99, 1), (3, 50, 2)])
def test_percentile_is_the_value_of_rank_ceil_n_q(n, q, rank):
    assert percentile(range(1, n + 1), q) == rank


def test_a_request_that_never_answered_stays_infinitely_slow():
    assert math.isinf(percentile([0.1, 0.2, math.inf], 95))
    assert percentile([0.1, 0.2, math.inf], 50) == 0.2


def test_no_values_have_no_percentile():
    assert math.isnan(percentile([], 95))
