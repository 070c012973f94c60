import math

from gates import Outcome


def test_passes_under_900_ms_and_within_10x_of_baseline(judge, healthy):
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.PASS
    assert [m.metric for m in result.measurements] == ["p95_max_ms", "max_degradation"]
    assert result.evidence["baseline_median_ms"] == 80 and result.evidence["baseline_requests"] == 4


def test_slow_interactive_traffic_fails_it_with_the_worst_ids(judge, healthy):
    for i in range(5):
        healthy.request(f"slow-{i}", sent_s=40 + i, ttft_s=2.5)
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "p95_max_ms"
    assert {w["request_id"] for w in result.evidence["worst"]} >= {f"slow-{i}" for i in range(5)}


def test_order_of_magnitude_degradation_fails_it_even_under_the_absolute_limit(judge, healthy):
    healthy.drop("requests", phase="baseline")
    for i in range(4):
        healthy.request(f"fast-base-{i}", sent_s=1 + i, ttft_s=0.02)
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_degradation"


def test_a_hang_counts_as_infinitely_slow(judge, healthy):
    for i in range(3):
        healthy.request(f"hang-{i}", sent_s=30 + i, ttft_s=None, e2e_s=None, status="timeout")
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.FAIL and math.isinf(result.headline.value)


def test_the_tail_queueing_under_load_is_not_a_degradation_of_the_typical_request(judge, healthy):
    # a fast unloaded reference (40 ms) and a few slow requests in the load's tail: the P95 is
    # 20x the reference, the median under 10x; the tail is the absolute bound's to judge
    healthy.drop("requests", phase="baseline")
    for i in range(30):
        healthy.request(f"fast-base-{i}", sent_s=1 + 0.2 * i, ttft_s=0.04)
    for i in range(6):
        healthy.request(f"queued-{i}", sent_s=30 + i, ttft_s=0.8)
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.PASS, result.explanation
    assert result.evidence["baseline_requests"] == 30


def test_only_requests_shaped_like_the_baseline_are_compared_with_it(judge, healthy):
    # long critical prompts take longer to prefill: slower, but not the baseline's traffic
    healthy.drop("requests", phase="baseline")
    for i in range(4):
        healthy.request(f"fast-base-{i}", sent_s=1 + i, ttft_s=0.02)
    healthy.drop("requests", phase="load")
    for i in range(20):
        healthy.request(f"short-{i}", sent_s=20 + i, ttft_s=0.05)
        healthy.request(f"document-{i}", sent_s=20 + i, ttft_s=0.6, prompt_tokens=3000)
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.PASS and result.evidence["load_like_baseline"] == 20


def test_without_baseline_only_the_absolute_limit_is_judged(judge, healthy):
    result = judge(healthy.drop("requests", phase="baseline"), "interactive_ttft")
    assert result.outcome is Outcome.PASS and len(result.measurements) == 1
    assert "degradation not measured" in result.explanation


def test_not_measurable_without_interactive_answers_under_load(judge, healthy):
    healthy.drop("requests", traffic_class="interactive")
    assert judge(healthy, "interactive_ttft").outcome is Outcome.NOT_MEASURABLE


def test_long_prompts_are_not_critical_traffic(judge, healthy):
    # a 32K-token prompt takes seconds of prefill on its own: not a chat user's TTFT budget
    for i in range(5):
        healthy.request(f"long-{i}", sent_s=40 + i, ttft_s=2.5, prompt_tokens=32_768)
    result = judge(healthy, "interactive_ttft")
    assert result.outcome is Outcome.PASS and "prompts ≤ 4096 tokens" in result.explanation
    assert all(not w["request_id"].startswith("long") for w in result.evidence["worst"])
