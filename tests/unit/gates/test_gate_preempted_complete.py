from gates import Outcome


def test_passes_when_preempted_requests_complete(judge, healthy):
    result = judge(healthy, "preempted_complete")
    assert result.outcome is Outcome.PASS and result.evidence["num_preempted"] == 2


def test_preempted_request_lost_to_oom_fails_it(judge, healthy):
    healthy.event("preempted", 50.0, request_id="int-20").drop("events", request_id="int-20", kind="finished")
    healthy.event("finished", 52.0, request_id="int-20", reason="oom")
    result = judge(healthy, "preempted_complete")
    assert result.outcome is Outcome.FAIL
    assert result.evidence["lost"] == [{"request_id": "int-20", "end": "oom"}]


def test_preempted_request_that_never_finished_is_lost(judge, healthy):
    healthy.event("preempted", 68.0, request_id="ghost")
    result = judge(healthy, "preempted_complete")
    assert result.outcome is Outcome.FAIL and result.evidence["lost"][0]["end"] == "never finished"


def test_intended_cancel_after_preemption_is_not_a_loss(judge, healthy):
    result = judge(healthy.event("preempted", 30.2, request_id="cancel-0"), "preempted_complete")
    assert result.outcome is Outcome.PASS and result.evidence["num_preempted"] == 2


def test_not_measurable_without_preemptions(judge, healthy):
    assert judge(healthy.drop("events", kind="preempted"), "preempted_complete").outcome is Outcome.NOT_MEASURABLE
