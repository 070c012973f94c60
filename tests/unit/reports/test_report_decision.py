"""The decision: medians and ranges over repeats, the best per metric beyond the noise, the overall
winner among candidates that passed every gate only beyond the noise, and what keeps a config
out of it."""

from __future__ import annotations

import dataclasses

import pytest

from gates import GateResult, Outcome, Verdict
from gates.noise import Estimate
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


def _metric(
    key: str, values: dict[str, float | None], better: Better | None = Better.HIGHER, *, var: float | None = None
) -> Metric:
    """A deciding metric whose value per run comes from `values` by run id; `var`: each run's
    sampling variance (None: a per-run number, whose noise only repeats can show)."""

    def estimate(run: ComparedRun) -> Estimate | None:
        value = values.get(run.summary.run_id)
        return None if value is None else Estimate(value, var)

    return Metric(key, key, lambda run: values.get(run.summary.run_id), count, better, deciding=True, estimate=estimate)


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
    # one run each and no sampling noise: nobody is better beyond noise; a baseline is never a leader
    assert [(b.metric.key, [c.name for c in b.leaders]) for b in d.best] == [(TIE_BREAK, ["b", "c", "a"])]


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
    assert [m.key for m in d.deciding] == [TIE_BREAK] and d.choice is None
    lines = decision_lines(d)
    assert lines[0] == (
        "overall: no overall winner at this load and repeat count (1 run per config): the runs cannot measure "
        "their own noise on any deciding metric: run with --repeat 3 or more"
    )
    assert lines[1].startswith("one run per config: the ranking is one sample of each")
    assert lines[2] == "ranking by medians (mean rank; an order, not a decision): a 1.0 · b 2.0"


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
    assert d.best[0].text() == "no difference beyond noise (a = b; best median a 25.0%)"


def test_a_clear_winner_beyond_the_noise_is_still_named(base_run):
    # a baseline's config given a candidate's place: far behind on two metrics, three repeats each
    configs = [_config(base_run, n, Outcome.PASS, Outcome.PASS, Outcome.PASS) for n in ("good", "bad")]
    goodput = _metric(TIE_BREAK, {"good-0": 100, "good-1": 104, "good-2": 98, "bad-0": 60, "bad-1": 62, "bad-2": 57})
    ttft = _metric(
        "ttft",
        {
            f"{n}-{i}": v
            for n, base in (("good", 300), ("bad", 900))
            for i, v in enumerate((base, base + 20, base - 10))
        },
        Better.LOWER,
        var=100.0,
    )
    d = decide(configs, [goodput, ttft])
    assert d.choice.name == "good"
    assert decision_lines(d)[0].startswith("overall: good (passed every gate in 3 of 3 runs; better beyond noise")
    assert [b.text() for b in d.best] == ["good 100 (98–104), beyond noise", "good 300 (290–320), beyond noise"]


def test_configs_within_each_others_noise_have_no_overall_winner(base_run):
    configs = [_config(base_run, n, Outcome.PASS, Outcome.PASS, Outcome.PASS) for n in ("a", "b")]
    # the medians favour a, by less than the repeats spread
    goodput = _metric(TIE_BREAK, {"a-0": 100, "a-1": 92, "a-2": 108, "b-0": 97, "b-1": 105, "b-2": 90})
    ttft = _metric(
        "ttft", {"a-0": 300, "a-1": 320, "a-2": 290, "b-0": 310, "b-1": 295, "b-2": 330}, Better.LOWER, var=400.0
    )
    d = decide(configs, [goodput, ttft])
    assert d.choice is None and [c.name for c, _ in d.ranking] == ["a", "b"]
    line = decision_lines(d)[0]
    assert line.startswith("overall: no overall winner at this load and repeat count (3 runs per config): ")
    assert "repeats per config" in line  # from the spread measured: how many would tell them apart
    assert [b.text().split(" (")[0] for b in d.best] == ["no difference beyond noise"] * 2


def test_a_trade_off_beyond_the_noise_is_named_and_never_advised_fewer_repeats_than_ran(base_run):
    # a is clearly better on goodput, b on TTFT; on hit ratio they differ by less than one run's noise
    configs = [_config(base_run, n) for n in ("a", "b")]
    goodput = _metric(TIE_BREAK, {"a-0": 100, "b-0": 60}, var=4.0)
    ttft = _metric("ttft", {"a-0": 900, "b-0": 300}, Better.LOWER, var=100.0)
    hits = _metric("hits", {"a-0": 0.50, "b-0": 0.49}, var=0.0001)
    d = decide(configs, [goodput, ttft, hits])
    assert d.choice is None
    assert d.advice.startswith(f"a and b trade off beyond the noise (a better on {TIE_BREAK}; b on ttft)")
    assert "would tell a from b on hits" in d.advice
    assert "--repeat 1)" not in d.advice
