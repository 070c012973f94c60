"""cancel_release on a target without engine events: polled request counts against the client's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gates import Outcome
from gates.held_requests import client_open
from tests.fixtures.records import RecordBuilder


def outside(*, release_after_s: float | None, poll_s: float = 0.05) -> RecordBuilder:
    """A vLLM-like run: one request served 10-12 s, one cancelled at 20.5 s (sent at 20 s); the
    engine holds it until `release_after_s` after the hang-up (None: for ever)."""
    b = RecordBuilder().signals(engine_events=False, engine_samples=False, tenant_samples=False, prometheus=True)
    b.request("served", sent_s=10.0, e2e_s=2.0)
    b.request("cut", sent_s=20.0, e2e_s=0.5, status="cancelled", cancel_intended=True, finish_reason=None)
    released = math.inf if release_after_s is None else 20.5 + release_after_s
    for t in np.arange(5.0, 40.0, poll_s):
        held = int(10.0 <= t < 12.0) + int(20.0 <= t < released)
        b.sample(float(t), 0, num_running=held, source="prometheus", num_blocks=None)
    return b


def test_a_release_is_bounded_by_the_first_poll_at_which_the_engine_holds_no_abandoned_request(judge) -> None:
    result = judge(outside(release_after_s=0.3), "cancel_release")
    assert result.outcome is Outcome.PASS
    assert result.evidence["source"].startswith("polled request counts")
    assert 0.3 <= result.headline.value <= 0.3 + 0.05 + 1e-6  # within one poll of the true release
    assert result.evidence["num_cancels"] == 1 and math.isclose(result.evidence["poll_interval_s"], 0.05)


def test_a_cancel_the_engine_holds_too_long_fails_and_one_never_released_is_infinite(judge) -> None:
    assert judge(outside(release_after_s=3.0), "cancel_release").outcome is Outcome.FAIL
    never = judge(outside(release_after_s=None), "cancel_release")
    assert never.outcome is Outcome.FAIL and math.isinf(never.headline.value)
    assert never.evidence["num_never_released"] == 1


def test_without_polled_counts_it_is_not_measurable(judge) -> None:
    b = RecordBuilder().signals(engine_events=False, prometheus=False)
    b.request("cut", sent_s=20.0, e2e_s=0.5, status="cancelled", cancel_intended=True)
    assert judge(b, "cancel_release").outcome is Outcome.NOT_MEASURABLE


def test_client_open_counts_requests_sent_and_not_done() -> None:
    requests = pd.DataFrame({"sent_s": [1.0, 2.0, 3.0], "done_s": [2.5, None, 3.5]})
    assert list(client_open(requests, np.array([0.5, 1.0, 2.6, 3.2, 10.0]))) == [0, 1, 1, 2, 1]
