"""The decision: medians and ranges over repeats, the best per metric, the overall ranking among
candidates that passed every gate, and what keeps a config out of it."""

from __future__ import annotations

import dataclasses

import pytest

from gates import GateResult, Outcome, Verdict
from reports.compared import ComparedConfig, ComparedRun
from reports.decision import decide, decision_lines, spread
from reports.metrics import TIE_BREAK, Better, Metric, count, share


@pytest.fixture
def base_run(healthy_run):
    record, verdict = healthy_run
    return ComparedRun.of(record, verdict)


def _run(base: ComparedRun, run_id: str, outcome: Outcome = Outcome.PASS) -> ComparedRun:
    verdict = Verdict(run_id, "p", "d", "defaults", (GateResult("no_oom", outcome, "x"),))
    return dataclasses.replace(base, verdict=verdict, summary=dataclasses.replace(base.summary, run_id=run_id))


def _config(base: ComparedRun, name: str, *outcomes: Outcome, baseline: bool = False) -> ComparedConfig:
    return ComparedConfig(
        name, tuple(_run(base, f"{name}-{i}", o) for i, o in enumerate(outcomes or (Outcome.PASS,))), baseline=baseline
    )


def _metric(key: str, values: dict[str, float | None], better: Better | None = Better.HIGHER) -> Metric:
    """A deciding metric whose value per run comes from `values` by run id."""
    return Metric(key, key, lambda run: values.get(run.summary.run_id), count, better, deciding=True)


def test_a_config_is_the_median_and_range_of_its_runs(base_run):
    config = _config(base_run, "a", Outcome.PASS, Outcome.PASS, Outcome.PASS)
    s = spread(config, _metric("m", {"a-0": 3, "a-1": 1, "a-2": None}))
    # a run without the number is left out; the median is P50 by nearest rank (record.query.percentile)
    assert (s.median, s.low, s.high, s.num_runs) == (1, 1, 3, 2)
    assert s.text(_metric("m", {})) == "1 (1–3)"


def test_only_candidates_that_passed_every_gate_in_every_run_are_ranked(base_run):
    configs = [
        _config(base_run, "a"),
        _config(base_run, "b", Outcome.PASS, Outcome.FAIL),
        _config(base_run, "c", Outcome.NOT_MEASURABLE),
        _config(base_run, "base", baseline=True),
    ]
    goodput = _metric(TIE_BREAK, {"a-0": 1, "b-0": 9, "b-1": 9, "c-0": 8, "base-0": 20})
    d = decide(configs, [goodput])
    assert d.choice.name == "a" and [c.name for c, _ in d.ranking] == ["a"]
    assert [(c.name, why) for c, why in d.not_eligible] == [
        ("b", "failed no_oom in 1 of 2 runs"),
        ("c", "no gate measurable in 1 of 1 runs"),
    ]
    assert [c.name for c in d.baselines] == ["base"]
    assert [(b.metric.key, [c.name for c in b.leaders]) for b in d.best] == [(TIE_BREAK, ["b"])]  # a baseline never


def test_the_lowest_mean_rank_wins_and_goodput_breaks_a_tie(base_run):
    configs = [_config(base_run, n) for n in ("a", "b", "c")]
    goodput = _metric(TIE_BREAK, {"a-0": 10, "b-0": 20, "c-0": 30})
    ttft = _metric("ttft", {"a-0": 100, "b-0": 300, "c-0": 200}, Better.LOWER)
    hits = _metric("hits", {"a-0": 0.5, "b-0": 0.5, "c-0": 0.1})
    d = decide(configs, [goodput, ttft, hits])
    # ranks: a 3, 1, 1.5 -> 5.5/3; b 2, 3, 1.5 -> 6.5/3; c 1, 2, 3 -> 6/3
    assert [(c.name, round(r, 3)) for c, r in d.ranking] == [("a", 1.833), ("c", 2.0), ("b", 2.167)]
    tied = decide(configs, [goodput, _metric("ttft", {"a-0": 30, "b-0": 20, "c-0": 10}, Better.LOWER)])
    assert [c.name for c, _ in tied.ranking] == ["c", "b", "a"]  # c: best goodput among equal mean ranks


def test_a_deciding_metric_an_eligible_candidate_lacks_is_left_out(base_run):
    configs = [_config(base_run, "a"), _config(base_run, "b")]
    d = decide(configs, [_metric(TIE_BREAK, {"a-0": 2, "b-0": 1}), _metric("tax", {"a-0": 0.5}, Better.LOWER)])
    assert [m.key for m in d.deciding] == [TIE_BREAK] and d.choice.name == "a"
    lines = decision_lines(d)
    assert lines[0] == (
        f"overall: a (passed every gate in 1 of 1 runs; mean rank 1.0 among 2 eligible candidates over {TIE_BREAK})"
    )
    assert lines[1] == "ranking (mean rank): a 1.0 · b 2.0"


def test_no_eligible_candidate_means_no_choice(base_run):
    d = decide([_config(base_run, "a", Outcome.FAIL)], [_metric(TIE_BREAK, {"a-0": 1})])
    assert d.choice is None
    assert decision_lines(d)[:2] == [
        "overall: no choice: no candidate passed every gate in every run",
        "not eligible: a (failed no_oom in 1 of 1 runs)",
    ]


def test_why_a_candidate_is_not_eligible_groups_its_failed_gates_by_runs(base_run):
    def failing(run_id: str, *gates: str) -> ComparedRun:
        verdict = Verdict(run_id, "p", "d", "defaults", tuple(GateResult(g, Outcome.FAIL, "x") for g in gates))
        return dataclasses.replace(base_run, verdict=verdict)

    config = ComparedConfig(
        "a",
        (
            failing("a-0", "tenant_share", "no_oom"),
            failing("a-1", "no_oom"),
            failing("a-2", "no_oom", "tenant_share", "batch_progress"),
        ),
    )
    ((_, why),) = decide([config], []).not_eligible
    assert (
        why == "failed no_oom in 3 of 3 runs; failed tenant_share in 2 of 3 runs; failed batch_progress in 1 of 3 runs"
    )


def test_values_that_print_the_same_are_a_tie(base_run):
    configs = [_config(base_run, "a"), _config(base_run, "b")]
    hits = Metric(
        "hits",
        "hits",
        lambda run: {"a-0": 0.2500001, "b-0": 0.25}[run.summary.run_id],
        share,
        Better.HIGHER,
        deciding=True,
    )
    d = decide(configs, [hits])
    assert [(c.name, r) for c, r in d.ranking] == [("a", 1.5), ("b", 1.5)]  # then by name: no goodput here
    assert d.best[0].text() == "a = b 25.0%"
