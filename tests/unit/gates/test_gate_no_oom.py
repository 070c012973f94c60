from gates import Outcome


def test_passes_when_no_witness_saw_an_oom(judge, healthy):
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.PASS and result.headline.value == 0


def test_engine_oom_event_fails_it(judge, healthy):
    result = judge(healthy.event("oom", 40.0, request_id="int-3", num_blocks=12), "no_oom")
    assert result.outcome is Outcome.FAIL
    assert result.evidence["oom_events"][0]["request_id"] == "int-3"


def test_client_5xx_out_of_memory_fails_it(judge, healthy):
    healthy.request("oom-1", sent_s=30, status="error", http_status=500, error_code="out_of_memory", ttft_s=None)
    result = judge(healthy.signals(engine_events=False, gpu_memory=False), "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["oom_responses"] == ["oom-1"]


def test_gpu_sample_over_capacity_fails_it(judge, healthy):
    healthy.sample(50.5, 800, gpu_mem_used_bytes=81e9, gpu_mem_total_bytes=80e9)
    result = judge(healthy.signals(engine_events=False, client_requests=False), "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["gpu_peak"]["t_s"] == 50.5


def test_not_measurable_without_any_witness(judge, healthy):
    healthy.signals(engine_events=False, client_requests=False, gpu_memory=False)
    assert judge(healthy, "no_oom").outcome is Outcome.NOT_MEASURABLE


def test_a_client_only_witness_that_saw_nothing_is_not_a_pass(judge, healthy):
    result = judge(healthy.signals(engine_events=False, gpu_memory=False), "no_oom")
    assert result.outcome is Outcome.NOT_MEASURABLE and "target names none" in result.explanation


def test_without_engine_events_a_bare_5xx_is_a_possible_oom_and_a_refusal_is_not(judge, healthy):
    healthy.request("busy-1", sent_s=30, status="error", http_status=503, error_code="overloaded", ttft_s=None)
    healthy.signals(engine_events=False, gpu_memory=False)
    assert judge(healthy, "no_oom").outcome is Outcome.NOT_MEASURABLE
    healthy.request("crash-1", sent_s=31, status="error", http_status=500, error_code="http_500", ttft_s=None)
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["oom_responses"] == ["crash-1"]


def test_with_engine_events_a_bare_5xx_is_left_to_the_engine_witness(judge, healthy):
    healthy.request("crash-1", sent_s=31, status="error", http_status=500, error_code="http_500", ttft_s=None)
    assert judge(healthy, "no_oom").outcome is Outcome.PASS
