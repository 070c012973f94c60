from gates import Outcome
from tests.fixtures.records import probe


def test_passes_when_neither_another_tenant_nor_another_salt_hits(judge, healthy):
    result = judge(healthy, "prefix_isolation")
    assert result.outcome is Outcome.PASS
    assert {m.metric: m.value for m in result.measurements} == {
        "max_other_tenant_hit_tokens": 0,
        "max_other_salt_hit_tokens": 0,
    }


def test_a_hit_across_tenants_fails_it_even_when_salts_isolate(judge, healthy):
    record = healthy.meta(probes={"cache_salt": probe(0), "cross_tenant": probe(512)})
    result = judge(record, "prefix_isolation")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_other_tenant_hit_tokens"
    assert result.headline.value == 512 and "another party hit 512" in result.explanation


def test_one_measurable_probe_is_judged_and_the_other_named(judge, healthy):
    record = healthy.meta(probes={"cache_salt": probe(0), "cross_tenant": probe(None, same_hit_tokens=None)})
    result = judge(record, "prefix_isolation")
    assert result.outcome is Outcome.PASS and [m.metric for m in result.measurements] == ["max_other_salt_hit_tokens"]
    assert "(not measured)" in result.explanation


def test_not_measurable_when_the_same_party_never_hit_or_no_probe_ran(judge, healthy):
    uncached = {"cache_salt": probe(0, same_hit_tokens=0), "cross_tenant": probe(0, same_hit_tokens=0)}
    assert judge(healthy.meta(probes=uncached), "prefix_isolation").outcome is Outcome.NOT_MEASURABLE
    assert judge(healthy.meta(probes={}), "prefix_isolation").outcome is Outcome.NOT_MEASURABLE


def test_a_probe_after_offload_to_a_tier_is_judged_by_its_party_metric(judge, healthy):
    """The GPU pool is scoped, the host tier's keys drop the salt: the salt metric takes the
    most any salt probe hit, in any tier."""
    probes = {
        "cache_salt": probe(0),
        "cross_tenant": probe(0),
        "cache_salt_host": probe(592),
        "cross_tenant_host": probe(0),
    }
    result = judge(healthy.meta(probes=probes), "prefix_isolation")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_other_salt_hit_tokens"
    assert result.headline.value == 592 and "cache salt host" in result.explanation
    assert [m.metric for m in result.measurements] == ["max_other_tenant_hit_tokens", "max_other_salt_hit_tokens"]


def test_a_tier_that_kept_nothing_leaves_the_gpu_probes_to_judge(judge, healthy):
    probes = {"cache_salt": probe(0), "cross_tenant": probe(0), "cache_salt_below_gpu": probe(0, same_hit_tokens=0)}
    result = judge(healthy.meta(probes=probes), "prefix_isolation")
    assert result.outcome is Outcome.PASS and "cache salt below gpu" in result.explanation
