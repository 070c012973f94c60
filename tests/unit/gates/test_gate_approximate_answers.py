from gates import Outcome
from tests.fixtures.records import RecordBuilder


def test_passes_when_every_answer_is_exact(judge, healthy):
    result = judge(healthy, "approximate_answers")
    assert result.outcome is Outcome.PASS
    answered = {g: result.evidence[g]["num_answered"] for g in ("critical", "batch")}
    assert answered == {"critical": 37, "batch": 8} and "long_prompt" not in result.evidence


def test_one_approximate_critical_answer_fails_it(judge, healthy):
    healthy.served("approx", sent_s=30, approximate=True)
    result = judge(healthy, "approximate_answers")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_critical_fraction"
    assert result.evidence["critical"] == {"num_answered": 38, "num_approximate": 1, "approximate": ["approx"]}


def test_long_prompts_and_batch_are_judged_against_their_own_bounds(judge, healthy):
    for i in range(4):
        healthy.served(f"doc-{i}", sent_s=30 + i, prompt_tokens=32_768, approximate=i < 3)
    healthy.served("batch-approx", sent_s=40, tenant="batchco", traffic_class="batch", approximate=True)
    result = judge(healthy, "approximate_answers", max_long_prompt_fraction=0.5, max_batch_fraction=0.5)
    values = {m.metric: m.value for m in result.measurements}
    assert values["max_long_prompt_fraction"] == 0.75 and values["max_batch_fraction"] == 1 / 9
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_long_prompt_fraction"


def test_refusals_are_not_answers(judge, healthy):
    healthy.request("refused", sent_s=30, status="error", http_status=429, error_code="kv_capacity", approximate=True)
    assert judge(healthy, "approximate_answers").outcome is Outcome.PASS


def test_not_measurable_without_answers(judge):
    builder = RecordBuilder().request(status="error", http_status=503, error_code="worker_lost")
    assert judge(builder, "approximate_answers").outcome is Outcome.NOT_MEASURABLE
