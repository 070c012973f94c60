import math

from gates import Outcome
from tests.fixtures.records import RecordBuilder


def test_passes_with_fast_releases(judge, healthy):
    result = judge(healthy, "cancel_release")
    assert result.outcome is Outcome.PASS
    assert result.headline.value == 0.05 and result.evidence["num_cancels"] == 2


def test_slow_release_fails_it_and_names_the_request(judge, healthy):
    result = judge(healthy.cancelled("slow", sent_s=60.0, release_latency_s=5.0), "cancel_release")
    assert result.outcome is Outcome.FAIL
    assert result.evidence["worst"][0] == {"request_id": "slow", "latency_s": 5.0}


def test_cancel_never_released_is_infinitely_late(judge, healthy):
    healthy.event("cancel_received", 60.0, request_id="stuck").event("admitted", 59.0, request_id="stuck")
    result = judge(healthy, "cancel_release")
    assert result.outcome is Outcome.FAIL and math.isinf(result.headline.value)
    assert result.evidence["num_never_released"] == 1


def test_cancel_the_engine_never_heard_of_is_timed_from_the_disconnect(judge):
    # Propagation broken: the engine ran the request to its end 4 s after the client left.
    builder = RecordBuilder().healthy().cancelled("deaf", sent_s=60.0, release_latency_s=4.0, propagated=False)
    result = judge(builder, "cancel_release")
    assert result.outcome is Outcome.FAIL
    assert result.evidence["worst"][0] == {"request_id": "deaf", "latency_s": 4.0}


def test_not_measurable_without_cancels_or_events(judge, healthy):
    no_cancels = healthy.drop("events", kind="cancel_received").drop("events", reason="cancelled")
    no_cancels.drop("requests", status="cancelled")
    assert judge(no_cancels, "cancel_release").outcome is Outcome.NOT_MEASURABLE
    no_events = RecordBuilder().healthy().signals(engine_events=False)
    assert judge(no_events, "cancel_release").outcome is Outcome.NOT_MEASURABLE


def test_an_intended_cancel_the_engine_refused_is_no_cancel(judge, healthy):
    # A cancel-storm request answered 429 before its cancel timer fired: it never held a block.
    healthy.request(
        "refused",
        sent_s=60.0,
        e2e_s=0.01,
        status="error",
        http_status=429,
        error_code="tenant_quota",
        cancel_intended=True,
        finish_reason=None,
    )
    healthy.event("rejected", 60.0, request_id="refused", reason="tenant_quota", num_blocks=300)
    result = judge(healthy, "cancel_release")
    assert result.outcome is Outcome.PASS and result.evidence["num_never_released"] == 0
