from gates import Outcome
from tests.fixtures.records import RecordBuilder


def test_passes_with_a_clean_final_state(judge, healthy):
    assert judge(healthy, "no_orphans").outcome is Outcome.PASS


def test_outstanding_reservations_after_drain_fail_it(judge, healthy):
    result = judge(healthy.final(reservations_outstanding=3), "no_orphans")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_orphan_reservations"


def test_request_stranded_on_a_killed_worker_fails_it(judge):
    builder = RecordBuilder().healthy().signals(worker_chaos=True)
    for rid in ("w1-a", "w1-b"):
        builder.event("admitted", 30.0, request_id=rid, worker="1")
    builder.event("worker_died", 31.0, worker="1", reason="SIGKILL")
    builder.event("reservation_released", 31.2, request_id="w1-a", reason="worker_lost")
    result = judge(builder, "no_orphans")
    assert result.outcome is Outcome.FAIL and result.evidence["stranded_requests"] == ["w1-b"]
    builder.event("reservation_released", 31.3, request_id="w1-b", reason="worker_lost")
    assert judge(builder, "no_orphans").outcome is Outcome.PASS


def test_a_request_released_just_before_its_worker_died_is_not_stranded(judge):
    """Regression: the router released the finished request's reservation, then the worker was
    killed before the router pulled the worker's own `finished` event, which died with it."""
    builder = RecordBuilder().healthy().signals(worker_chaos=True)
    builder.event("admitted", 30.0, request_id="w0-a", worker="0")
    builder.event("reservation_released", 30.5, request_id="w0-a", reason="finished", worker="0")
    builder.event("worker_died", 30.6, worker="0", reason="SIGKILL")
    assert judge(builder, "no_orphans").outcome is Outcome.PASS


def test_not_measurable_without_final_state_or_worker_kill(judge):
    builder = RecordBuilder().healthy()
    builder.meta(final={})
    assert judge(builder, "no_orphans").outcome is Outcome.NOT_MEASURABLE


def test_only_the_final_keys_present_are_judged(judge):
    builder = RecordBuilder().healthy().meta(final={"reservations_outstanding": 0})
    result = judge(builder, "no_orphans")
    assert result.outcome is Outcome.PASS and [m.metric for m in result.measurements] == ["max_orphan_reservations"]
