from gates import Outcome
from tests.fixtures.records import RecordBuilder


def share_refusal(
    builder: RecordBuilder, rid: str, t_s: float, *, need: int, live: int, limit: str = "kv_share"
) -> RecordBuilder:
    """acme refused for its quota at `t_s`: the engine's event and the client's 429."""
    builder.request(
        rid,
        sent_s=t_s,
        ttft_s=None,
        e2e_s=0.01,
        status="error",
        http_status=429,
        error_code="tenant_quota",
        finish_reason=None,
    )
    return builder.event(
        "rejected",
        t_s,
        request_id=rid,
        tenant="acme",
        traffic_class="interactive",
        reason="tenant_quota",
        mode=limit,
        num_blocks=need,
        tenant_live_blocks=live,
    )


def test_passes_when_refusals_stay_within_each_class_bound(judge, healthy):
    result = judge(healthy, "rejections")
    assert result.outcome is Outcome.PASS
    values = {m.metric: m.value for m in result.measurements}
    assert values == {"max_critical_fraction": 0.0, "max_batch_fraction": 0.2, "max_refused_under_cap": 0}
    assert result.evidence["refused_by_group_and_code"] == {"batch/kv_capacity": 2}


def test_refusing_most_chat_fails_it(judge, healthy):
    for i in range(50):
        healthy.request(
            f"refused-{i}",
            sent_s=30 + i * 0.5,
            ttft_s=None,
            e2e_s=0.01,
            status="error",
            http_status=429,
            error_code="tenant_quota",
            finish_reason=None,
        )
    result = judge(healthy, "rejections")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_critical_fraction"
    assert result.headline.value == 50 / 80


def test_long_documents_are_judged_apart_from_chat(judge, healthy):
    for i in range(4):
        healthy.served(f"doc-{i}", sent_s=30 + i, prompt_tokens=32_768)
        healthy.request(
            f"doc-refused-{i}",
            sent_s=40 + i,
            ttft_s=None,
            e2e_s=0.01,
            status="error",
            http_status=429,
            error_code="kv_capacity",
            finish_reason=None,
            prompt_tokens=32_768,
        )
    result = judge(healthy, "rejections", max_long_prompt_fraction=0.4)
    values = {m.metric: m.value for m in result.measurements}
    assert values["max_critical_fraction"] == 0.0 and values["max_long_prompt_fraction"] == 0.5
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_long_prompt_fraction"


def test_a_refusal_at_the_cap_by_worst_case_reservations_is_no_failure(judge, healthy):
    # cap floor(0.15 × 1,000) = 150 blocks; acme has 13 requests in flight reserving 10 each (130),
    # the 21 more it asks for would pass the cap, though only 30 of its blocks are live
    for i in range(13):
        healthy.event("admitted", 29.0, request_id=f"inflight-{i}", tenant="acme", num_blocks=10)
    result = judge(share_refusal(healthy, "at-cap", 30.0, need=21, live=30), "rejections")
    assert next(m for m in result.measurements if m.metric == "max_refused_under_cap").value == 0


def test_a_refusal_with_room_under_the_cap_fails_it(judge, healthy):
    # the same 13 requests, finished before the refusal: their reservations should be gone
    for i in range(13):
        healthy.event("admitted", 29.0, request_id=f"done-{i}", tenant="acme", num_blocks=10)
        healthy.event("finished", 29.5, request_id=f"done-{i}", tenant="acme", reason="stop")
    result = judge(share_refusal(healthy, "leaked", 30.0, need=21, live=30), "rejections")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_refused_under_cap"
    [found] = result.evidence["refused_under_cap"]
    assert (found["request_id"], found["reserved_blocks"], found["live_blocks"], found["cap_blocks"]) == (
        "leaked",
        0,
        30,
        150,
    )


def test_a_tenant_refused_before_it_ever_got_a_request_in_is_judged_too(judge):
    # every cap too small for any request: nothing of acme's was ever admitted
    builder = RecordBuilder()
    for i in range(3):
        share_refusal(builder, f"never-{i}", 20.0 + i, need=200, live=0)
    result = judge(builder, "rejections")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_critical_fraction"
    assert next(m for m in result.measurements if m.metric == "max_refused_under_cap").value == 0


def test_a_tenant_at_its_sequence_limit_is_not_refused_under_its_cap(judge, healthy):
    result = judge(share_refusal(healthy, "seqs", 30.0, need=5, live=0, limit="active_seqs"), "rejections")
    assert next(m for m in result.measurements if m.metric == "max_refused_under_cap").value == 0


def test_without_engine_events_only_the_shares_are_judged(judge, healthy):
    result = judge(healthy.signals(engine_events=False), "rejections")
    assert result.outcome is Outcome.PASS
    assert "max_refused_under_cap" not in {m.metric for m in result.measurements}


def test_not_measurable_without_requests_or_engine_events(judge):
    builder = RecordBuilder().healthy().signals(client_requests=False, engine_events=False)
    assert judge(builder, "rejections").outcome is Outcome.NOT_MEASURABLE


def test_503_and_529_overload_refusals_count_and_an_oom_503_does_not(judge, healthy):
    for i, (status, code) in enumerate([(503, "overloaded"), (529, "overloaded_error"), (503, "out_of_memory")]):
        healthy.request(
            f"busy-{i}",
            sent_s=30 + i,
            ttft_s=None,
            e2e_s=0.01,
            status="error",
            http_status=status,
            error_code=code,
            finish_reason=None,
        )
    result = judge(healthy, "rejections")
    values = {m.metric: m.value for m in result.measurements}
    assert values["max_critical_fraction"] == 2 / 33
    assert result.evidence["refused_by_group_and_code"]["critical/overloaded"] == 1
