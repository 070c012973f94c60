from gates import Outcome


def test_passes_when_the_pool_admits_as_much_as_before(judge, healthy):
    # after the run, 100 cached blocks and 20 of idle sessions: reusable, so capacity is back
    result = judge(healthy, "capacity_after_drain")
    assert result.outcome is Outcome.PASS
    assert result.evidence["capacity_blocks"] == {"initial": 980, "final": 980}


def test_blocks_held_by_no_one_fail_it(judge, healthy):
    result = judge(healthy.final(live_blocks=45, free_blocks=855), "capacity_after_drain")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "max_lost_blocks"
    assert result.headline.value == 5


def test_a_reservation_never_released_fails_it(judge, healthy):
    result = judge(healthy.final(pending_blocks=12), "capacity_after_drain")
    assert result.outcome is Outcome.FAIL and result.headline.value == 12


def test_a_request_still_held_takes_a_slot_and_its_blocks(judge, healthy):
    result = judge(healthy.final(requests_in_engine=1, live_blocks=50, free_blocks=850), "capacity_after_drain")
    assert result.outcome is Outcome.FAIL
    assert {m.metric: m.value for m in result.measurements} == {"max_lost_blocks": 10, "max_lost_slots": 1}


def test_not_measurable_without_the_pool_before_the_run(judge, healthy):
    assert judge(healthy.meta(initial={}), "capacity_after_drain").outcome is Outcome.NOT_MEASURABLE
