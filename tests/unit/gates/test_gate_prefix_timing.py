from gates import Outcome
from tests.fixtures.records import timing_probe


def test_passes_when_only_the_same_party_tells_its_cached_prompts(judge, healthy):
    result = judge(healthy, "prefix_timing")
    assert result.outcome is Outcome.PASS and result.headline.metric == "max_other_tenant_auc"
    assert result.evidence["cross_tenant"]["same_party"]["auc"] == 1.0
    assert "does not tell" in result.explanation


def test_fails_when_another_tenant_answers_as_fast_as_the_same_one(judge, healthy):
    leak = timing_probe(other_warm_ms=20.0)
    result = judge(healthy.meta(probes={"timing_cross_tenant": leak}), "prefix_timing")
    assert result.outcome is Outcome.FAIL and result.headline.value == 1.0
    assert "another tenant tells them" in result.explanation


def test_each_pair_has_its_metric_and_a_leaking_salt_fails_beside_a_sealed_tenant(judge, healthy):
    probes = {"timing_cross_tenant": timing_probe(), "timing_cache_salt": timing_probe(other_warm_ms=20.0)}
    result = judge(healthy.meta(probes=probes), "prefix_timing")
    assert {m.metric: m.ok for m in result.measurements} == {"max_other_tenant_auc": True, "max_other_salt_auc": False}
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_other_salt_auc"


def test_not_measurable_when_the_same_party_cannot_tell_its_own_prompts(judge, healthy):
    """No prefix cache (warm as slow as cold): nothing can be told of another party, even a 'pass'."""
    uncached = timing_probe(same_warm_ms=80.0)
    result = judge(healthy.meta(probes={"timing_cross_tenant": uncached}), "prefix_timing")
    assert result.outcome is Outcome.NOT_MEASURABLE and "isolation cannot be told" in result.explanation


def test_not_measurable_when_no_probe_ran_was_not_sent_or_served_too_few(judge, healthy):
    assert judge(healthy.meta(probes={}), "prefix_timing").outcome is Outcome.NOT_MEASURABLE
    unsent = {"timing_cross_tenant": {"sent": False, "detail": "the target's speed: refused"}}
    result = judge(healthy.meta(probes=unsent), "prefix_timing")
    assert result.outcome is Outcome.NOT_MEASURABLE and "refused" in result.explanation
    few = {"timing_cross_tenant": timing_probe(rounds=4)}
    assert judge(healthy.meta(probes=few), "prefix_timing").outcome is Outcome.NOT_MEASURABLE
