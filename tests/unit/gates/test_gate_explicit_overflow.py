from gates import Outcome


def test_passes_when_overflow_gets_explicit_429s(judge, healthy):
    result = judge(healthy, "explicit_overflow")
    assert result.outcome is Outcome.PASS
    assert result.evidence["explicit_errors_by_code"] == {"kv_capacity": 2}


def test_a_hang_fails_it(judge, healthy):
    healthy.request("hung", sent_s=50, ttft_s=None, e2e_s=None, status="timeout", traffic_class="batch")
    result = judge(healthy, "explicit_overflow")
    assert result.outcome is Outcome.FAIL and result.evidence["timeouts"] == ["hung"]


def test_silent_truncation_fails_it_but_a_flagged_clamp_does_not(judge, healthy):
    healthy.request("clamped", finish_reason="length", completion_tokens=100, max_tokens=512, max_tokens_clamped=True)
    assert judge(healthy, "explicit_overflow").outcome is Outcome.PASS
    healthy.request("cut", finish_reason="length", completion_tokens=100, max_tokens=512)
    result = judge(healthy, "explicit_overflow")
    assert result.outcome is Outcome.FAIL and result.evidence["silent_truncations"] == ["cut"]


def test_a_bare_500_or_a_dropped_connection_is_unexplained(judge, healthy):
    healthy.request("bare", status="error", http_status=500, ttft_s=None)
    healthy.request("dropped", status="error", http_status=0, error_code="connection_error", ttft_s=None)
    result = judge(healthy, "explicit_overflow")
    assert result.outcome is Outcome.FAIL and result.evidence["unexplained_errors"] == ["bare", "dropped"]


def test_a_stream_ended_by_an_sse_error_event_with_a_code_is_explicit(judge, healthy):
    # a worker killed mid-answer: the router ends the started stream with a worker_lost event
    healthy.request("lost", status="error", http_status=200, error_code="worker_lost", finish_reason=None)
    healthy.request("cut", status="error", http_status=200, error_code="connection_error", finish_reason=None)
    result = judge(healthy, "explicit_overflow")
    assert result.evidence["unexplained_errors"] == ["cut"]
    assert result.evidence["explicit_errors_by_code"]["worker_lost"] == 1


def test_not_measurable_without_client_requests(judge, healthy):
    assert judge(healthy.signals(client_requests=False), "explicit_overflow").outcome is Outcome.NOT_MEASURABLE


def test_a_malformed_or_empty_stream_is_unexplained_though_it_began_with_200(judge, healthy):
    healthy.request("broken", status="error", http_status=200, error_code="bad_response", ttft_s=None)
    healthy.request("empty", status="error", http_status=200, error_code="empty_answer", ttft_s=None)
    result = judge(healthy, "explicit_overflow")
    assert result.outcome is Outcome.FAIL and result.evidence["unexplained_errors"] == ["broken", "empty"]
