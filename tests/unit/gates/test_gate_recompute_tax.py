from gates import Outcome


def test_passes_when_little_compute_redoes_discarded_work(judge, healthy):
    result = judge(healthy, "recompute_tax")
    assert result.outcome is Outcome.PASS and result.headline.value == 1_200 / 60_000
    assert result.evidence["most_recomputed"] == [
        {"request_id": "batch-0", "tokens": 600},
        {"request_id": "batch-1", "tokens": 600},
    ]
    assert result.evidence["num_preemptions_by_mode"] == {"recompute": 2}


def test_a_heavy_tax_fails_it(judge, healthy):
    result = judge(healthy.final(recompute_tokens=15_000), "recompute_tax")
    assert result.outcome is Outcome.FAIL and result.headline.value == 0.25


def test_not_measurable_without_the_run_totals(judge, healthy):
    healthy.meta(final={"recompute_tokens": 0})
    assert judge(healthy, "recompute_tax").outcome is Outcome.NOT_MEASURABLE
    assert judge(healthy.final(computed_tokens=0), "recompute_tax").outcome is Outcome.NOT_MEASURABLE
