from gates import Outcome
from tests.fixtures.records import RecordBuilder

PD = {"num_transfers": 40, "num_failed": 1, "num_fallbacks": 1}


def test_passes_when_no_decode_block_is_reserved_for_an_ended_request(judge, healthy):
    result = judge(healthy, "no_stranded_reservation")
    assert result.outcome is Outcome.PASS and result.headline.value == 0


def test_blocks_reserved_for_ended_requests_fail_it(judge, healthy):
    result = judge(healthy.final(pd={**PD, "stranded_reservation_blocks": 30}), "no_stranded_reservation")
    assert result.outcome is Outcome.FAIL and result.headline.value == 30
    assert result.evidence["num_transfers"] == 40


def test_a_record_without_a_pd_pair_is_not_measurable_and_does_not_apply(judge):
    builder = RecordBuilder().healthy()
    builder.final(pd=None)
    result = judge(builder, "no_stranded_reservation")
    assert result.outcome is Outcome.NOT_MEASURABLE and not result.applies
