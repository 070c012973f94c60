"""Client lag: the bound on its P99 and what a summary says."""

from __future__ import annotations

from harness.loadgen.client_lag import MAX_LAG_P99_MS, summarize_lag


def test_on_time_load_is_within_the_bound() -> None:
    lag = summarize_lag([0.001] * 200)
    assert lag.is_within and lag.num_late == 0 and lag.num_requests == 200 and lag.bound_ms == MAX_LAG_P99_MS


def test_more_than_one_percent_late_passes_the_bound() -> None:
    lags = [0.0] * 97 + [0.2] * 3
    lag = summarize_lag(lags, bound_ms=50.0)
    assert not lag.is_within and lag.num_late == 3
    assert "3 of 100 requests" in lag.explain()


def test_no_request_no_lag() -> None:
    assert summarize_lag([]).is_within
