from gates import Outcome, slo
from tests.fixtures.records import RecordBuilder


def refuse(builder: RecordBuilder, n: int, code: str = "kv_capacity", status: int = 429) -> RecordBuilder:
    for i in range(n):
        builder.request(
            f"refused-{i}",
            sent_s=30 + i * 0.5,
            ttft_s=None,
            e2e_s=0.01,
            status="error",
            http_status=status,
            error_code=code,
            finish_reason=None,
        )
    return builder


def test_passes_when_the_offered_chat_is_served_in_time(judge, healthy):
    result = judge(healthy, "goodput")
    assert result.outcome is Outcome.PASS and result.headline.value == 1.0
    # 30 chat requests under load; the baseline's, the cooldown's and the two intended cancels are not offered
    assert (result.evidence["num_offered"], result.evidence["num_in_time"]) == (30, 30)


def test_refused_requests_count_against_it(judge, healthy):
    result = judge(refuse(healthy, 50), "goodput")
    assert result.outcome is Outcome.FAIL and result.headline.value == 30 / 80
    assert result.evidence["missed_by_outcome"] == {"kv_capacity": 50}


def test_a_target_that_answers_nothing_fails_it_rather_than_being_unmeasurable(judge):
    builder = refuse(RecordBuilder(), 20, code="out_of_memory", status=503)
    result = judge(builder, "goodput")
    assert result.outcome is Outcome.FAIL and result.headline.value == 0.0


def test_late_hung_and_empty_answers_are_not_served_in_time(judge, healthy):
    healthy.request("late", sent_s=30, ttft_s=1.5)
    healthy.request("hung", sent_s=31, ttft_s=None, e2e_s=None, status="timeout", error_code="timeout")
    healthy.request("empty", sent_s=32, ttft_s=None, e2e_s=0.5, completion_tokens=0)
    result = judge(healthy, "goodput")
    assert result.outcome is Outcome.PASS and result.headline.value == 30 / 33
    assert result.evidence["missed_by_outcome"] == {"late": 1, "no_first_token": 1, "timeout": 1}


def test_the_shared_objective_sets_what_in_time_means(judge, healthy):
    # the healthy chat answers in 200, 250, ... 400 ms: within 200 ms, one of every five
    result = judge(healthy, "goodput", **{slo.TTFT_MS: 200})
    assert result.outcome is Outcome.FAIL and result.headline.value == 6 / 30


def test_long_prompts_and_other_classes_are_not_offered_chat(judge, healthy):
    refuse(healthy, 3)
    for i in range(5):
        healthy.request(
            f"long-{i}",
            sent_s=40 + i,
            ttft_s=None,
            e2e_s=0.01,
            status="error",
            http_status=429,
            error_code="kv_capacity",
            prompt_tokens=32_768,
        )
    assert judge(healthy, "goodput").evidence["num_offered"] == 33


def test_not_measurable_without_chat_offered_under_load(judge, healthy):
    healthy.drop("requests", traffic_class="interactive")
    assert judge(healthy, "goodput").outcome is Outcome.NOT_MEASURABLE
    assert judge(RecordBuilder().healthy().signals(client_requests=False), "goodput").outcome is Outcome.NOT_MEASURABLE


def test_a_request_left_unfinished_at_the_stop_is_offered_and_not_served(judge, healthy):
    healthy.request("open", sent_s=31, ttft_s=None, e2e_s=15.0, status="unfinished", error_code="run_stopped")
    result = judge(healthy, "goodput")
    assert result.evidence["num_offered"] == 31 and result.evidence["missed_by_outcome"] == {"run_stopped": 1}
