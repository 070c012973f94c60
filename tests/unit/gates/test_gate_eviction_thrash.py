import pytest

from gates import Outcome
from record.query import WHOLE_RUN, prefix_hit_rate
from tests.fixtures.records import RecordBuilder


def test_passes_with_a_trickle_of_evictions(judge, healthy):
    result = judge(healthy, "eviction_thrash")
    assert result.outcome is Outcome.PASS
    assert result.evidence["evicted_blocks"] == 40 and result.evidence["load_s"] == 60


def test_eviction_without_pressure_above_one_percent_of_the_pool_per_second_fails_it(judge, healthy):
    for t in range(20, 60):
        healthy.event("evicted", t + 0.5, num_blocks=20, reason="overflow")
    result = judge(healthy, "eviction_thrash")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_unforced_evicted_fraction_per_s"
    assert result.evidence["busiest_second"]["evicted_blocks"] == 20


def test_evictions_pressure_asks_for_are_reported_not_judged_by_their_rate(judge, healthy):
    # a load larger than the pool: the evict rung, the pool and a tenant's cap evict at the rate
    # context arrives; the sessions that came back for theirs are counted
    for t in range(20, 60):
        reason = ("watermark", "capacity", "tenant_quota")[t % 3]
        healthy.event("evicted", t + 0.5, num_blocks=20, reason=reason, request_id=f"s-{t}")
        healthy.request(f"turn-{t}", sent_s=t + 1.0 if t % 2 else t - 1.0, session_id=f"s-{t}")
    result = judge(healthy, "eviction_thrash")
    assert result.outcome is Outcome.PASS, result.explanation
    assert result.evidence["num_evictions"] == 45 and result.evidence["num_unforced_evictions"] == 0
    assert result.evidence["evicted_sessions_that_came_back"] == 20


def test_cached_prefix_reclaims_are_reported_not_judged_by_the_rate(judge, healthy):
    # 1,000 cached blocks/s over the 100 s run on a 1,000-block pool: a full cache making room for
    # new prompts at that rate. Refcount-0 blocks are free memory: their reclaim rate is the load's
    # new-prompt rate (the same under every policy), so it is evidence, not thrash.
    result = judge(healthy.final(num_evicted_cached_blocks=100_000), "eviction_thrash")
    assert result.outcome is Outcome.PASS and result.evidence["evicted_cached_blocks"] == 100_000
    assert result.evidence["cached_reclaimed_fraction_per_s"] == 1.0


def test_prefix_hit_rate_below_its_band_fails_it(judge, healthy):
    result = judge(healthy, "eviction_thrash", min_prefix_hit_rate=0.5)
    assert result.outcome is Outcome.FAIL and result.headline.metric == "min_prefix_hit_rate"


def test_not_measurable_without_engine_events(judge, healthy):
    assert judge(healthy.signals(engine_events=False), "eviction_thrash").outcome is Outcome.NOT_MEASURABLE


def test_prefix_hit_rate_counts_the_prompts_of_queued_requests_too(judge, tmp_path):
    # A request emits `admitted` or `queued` on arrival, never both: counting only admitted prompts
    # would put q's 90 hit tokens over a's 100 prompt tokens (140 %).
    builder = (
        RecordBuilder()
        .event("admitted", 20.0, request_id="a", num_tokens=100)
        .event("scheduled", 20.1, request_id="a", num_tokens=50)
        .event("queued", 21.0, request_id="q", num_tokens=100)
        .event("scheduled", 25.0, request_id="q", num_tokens=90)
    )
    result = judge(builder, "eviction_thrash", min_prefix_hit_rate=0.5)
    rate = next(m for m in result.measurements if m.metric == "min_prefix_hit_rate")
    assert rate.value == pytest.approx(140 / 200) and result.outcome is Outcome.PASS
    record = builder.build(tmp_path / "run")
    assert prefix_hit_rate(record, WHOLE_RUN) == pytest.approx(140 / 200)
    assert prefix_hit_rate(record, (22.0, 70.0)) == pytest.approx(90 / 100)  # q only: scheduled in the window
    assert prefix_hit_rate(record, (70.0, 100.0)) is None  # nothing scheduled


def test_a_target_with_kv_cache_events_is_judged_from_them_and_its_counters(judge) -> None:
    b = RecordBuilder().signals(engine_events=False, prometheus=True)
    b.initial(prefix_cache_queries_tokens=1000.0, prefix_cache_hits_tokens=100.0)
    b.final(
        prefix_cache_queries_tokens=5000.0,
        prefix_cache_hits_tokens=1100.0,
        kv_blocks_stored=300,
        kv_blocks_removed=40,
        kv_blocks_restored=6,
        kv_all_cleared=1,
        kv_batches_missed=0,
    )
    result = judge(b, "eviction_thrash")
    assert result.outcome is Outcome.PASS and result.headline.metric == "min_prefix_hit_rate"
    assert result.headline.value == 0.25  # the run's own hits: (1100 - 100) / (5000 - 1000)
    assert result.evidence["kv_blocks_restored"] == 6
    assert judge(b, "eviction_thrash", min_prefix_hit_rate=0.5).outcome is Outcome.FAIL


def test_without_kv_cache_events_an_outside_target_is_not_measurable(judge) -> None:
    b = RecordBuilder().signals(engine_events=False, prometheus=True)
    b.final(prefix_cache_queries_tokens=5000.0, prefix_cache_hits_tokens=1100.0)
    result = judge(b, "eviction_thrash")
    assert result.outcome is Outcome.NOT_MEASURABLE and "--kv-events" in result.explanation
    assert result.evidence["prefix_hit_rate"] == 0.22
