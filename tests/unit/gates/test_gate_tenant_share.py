from gates import Outcome


def test_passes_when_every_tenant_stays_under_its_cap(judge, healthy):
    result = judge(healthy, "tenant_share")
    assert result.outcome is Outcome.PASS and result.headline.value < 1


def test_one_sample_over_cap_fails_it_and_names_the_sample(judge, healthy):
    result = judge(healthy.tenant_sample(42.0, "globex", 180), "tenant_share")
    assert result.outcome is Outcome.FAIL
    worst = result.evidence["worst_sample"]
    assert (worst["tenant"], worst["t_s"], worst["share"]) == ("globex", 42.0, 0.18)
    assert result.evidence["tenants_over_cap"] == ["globex"]


def test_cap_comes_from_meta_when_the_sample_lacks_it(judge, healthy):
    result = judge(healthy.tenant_sample(42.0, "acme", 160, cap=None), "tenant_share")
    assert result.outcome is Outcome.FAIL and result.evidence["worst_sample"]["cap"] == 0.15


def test_not_measurable_without_tenant_samples(judge, healthy):
    assert judge(healthy.signals(tenant_samples=False), "tenant_share").outcome is Outcome.NOT_MEASURABLE
