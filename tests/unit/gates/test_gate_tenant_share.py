import pandas as pd
import pytest

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


# ---------------------------------------------------------------- the client's estimate
def external(builder, *, tenants: dict[str, int], cap: float | None = 0.5):
    """A target without tenants (no engine tenant samples): each tenant keeps `tenants[name]`
    prompts of 64 tokens (4 blocks of 16) in flight through the load; the client's estimate,
    made by the harness's own estimator, is the record's only tenant view."""
    from harness.collectors.tenant_estimate import PoolCapacity, estimate_tenant_rows
    from record.run_record import CollectorStatus

    builder.rows["tenant_samples"].clear()
    builder.rows["requests"].clear()
    for tenant, num_in_flight in tenants.items():
        for k in range(num_in_flight):
            builder.request(
                f"{tenant}-{k}", sent_s=10.0, e2e_s=60.0, tenant=tenant, prompt_tokens=64, completion_tokens=0
            )
    requests = pd.DataFrame(builder.rows["requests"])
    caps = dict.fromkeys(tenants, cap) if cap is not None else {}
    pool = PoolCapacity(num_blocks=builder.num_blocks, block_tokens=16, source="vllm:cache_config_info")
    for row in estimate_tenant_rows(requests, [20.0, 40.0, 60.0], pool, caps):
        builder.rows["tenant_samples"].append(row)
    builder.signals(tenant_samples=False, engine_events=False, engine_samples=False)
    return builder.meta(tenants={}, collectors={"tenant_estimate": CollectorStatus(available=True, detail="test")})


def test_gate_truth_one_tenant_holding_most_of_the_pool_fails_on_the_estimate(judge, healthy):
    result = judge(external(healthy, tenants={"hog": 200, "mouse": 10}), "tenant_share")  # 800 / 1000 blocks
    assert result.outcome is Outcome.FAIL
    assert result.evidence["tenants_over_cap"] == ["hog"] and result.evidence["source"] == "client_estimate"
    assert result.evidence["worst_sample"]["share"] == 0.8
    assert "estimated from the client" in result.explanation
    assert result.sources == ("per-tenant KV estimated from the client's in-flight requests",)


def test_gate_truth_a_balanced_load_passes_on_the_estimate(judge, healthy):
    result = judge(external(healthy, tenants={"a": 60, "b": 60, "c": 60}), "tenant_share")  # 240 blocks each
    assert result.outcome is Outcome.PASS and result.evidence["num_samples_over_cap"] == 0
    assert result.headline.value == pytest.approx(0.24 / 0.5)


def test_an_estimate_without_caps_is_not_measurable_and_names_the_option(judge, healthy):
    result = judge(external(healthy, tenants={"hog": 200}, cap=None), "tenant_share")
    assert result.outcome is Outcome.NOT_MEASURABLE and "--tenant-caps" in result.explanation


def test_the_engines_own_samples_are_preferred_and_the_estimate_compared(judge, healthy):
    from record.run_record import CollectorStatus

    for t in (20.0, 40.0):
        healthy.tenant_sample(t, "acme", 300, source="client_estimate")  # the estimate says over the cap
    healthy.meta(collectors={"tenant_estimate": CollectorStatus(available=True, detail="test")})
    result = judge(healthy, "tenant_share")
    assert result.outcome is Outcome.PASS and result.evidence["source"] == "engine"
    assert result.sources == ("per-tenant samples",)
    compared = result.evidence["estimate_vs_engine"]
    assert compared["num_samples"] == 2 and compared["peak_share_estimate"] == 0.3
