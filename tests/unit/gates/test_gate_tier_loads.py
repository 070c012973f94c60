from gates import Outcome
from tests.fixtures.records import RecordBuilder

TIERS = {"host": {"used_blocks": 40, "leaked_blocks": 0}, "disk": {"used_blocks": 300, "leaked_blocks": 0}}


def with_loads(builder, *loads):
    """`builder` with these (time, outcome, blocks, wait) loads and clean tiers after the drain."""
    for t, reason, blocks, wait_s in loads:
        builder.event("tier_load", t, mode="host", num_blocks=blocks, latency_s=wait_s, reason=reason)
    return builder.final(tiers=TIERS, tier_loads_in_flight=0)


def test_passes_when_loads_are_quick_and_failures_recompute(judge, healthy):
    record = with_loads(
        healthy, (20.0, "ok", 64, 0.03), (30.0, "failed", 8, 0.01), (40.0, "slower_than_prefill", 500, 9)
    )
    result = judge(record, "tier_loads")
    assert result.outcome is Outcome.PASS  # the slow load was never waited for: it recomputed
    assert {m.metric: m.value for m in result.measurements} == {
        "max_load_wait_s": 0.03,
        "max_wrong_blocks_served": 0,
        "max_leaked_blocks": 0,
    }


def test_a_long_wait_or_a_corrupt_block_served_fails_it(judge):
    slow = judge(with_loads(RecordBuilder().healthy(), (20.0, "ok", 900, 3.5)), "tier_loads")
    assert slow.outcome is Outcome.FAIL and slow.headline.metric == "max_load_wait_s"
    corrupt = judge(with_loads(RecordBuilder().healthy(), (20.0, "served_corrupt", 12, 0.02)), "tier_loads")
    assert corrupt.outcome is Outcome.FAIL and corrupt.headline.metric == "max_wrong_blocks_served"
    assert corrupt.headline.value == 12


def test_leaked_blocks_or_a_load_left_in_flight_fail_it(judge, healthy):
    leaky = {**TIERS, "disk": {"used_blocks": 300, "leaked_blocks": 3}}
    result = judge(with_loads(healthy, (20.0, "ok", 8, 0.01)).final(tiers=leaky, tier_loads_in_flight=1), "tier_loads")
    assert result.outcome is Outcome.FAIL and result.headline.value == 4


def test_not_measurable_without_tiers(judge):
    assert judge(RecordBuilder(), "tier_loads").outcome is Outcome.NOT_MEASURABLE
