"""The release gate on stored records: `kvgate gate RUN --against BASE`, and `kvgate baseline save`.

Each record is the healthy run plus 200 chat requests under load whose TTFTs are drawn from one
seeded distribution, so repeats of a config differ as repeats do; the planted effects are large
enough to be certain (a 20 % slower executor, a pool that preempts 40 requests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from record.baseline_store import find_runs, save_runs
from tests.fixtures.records import RecordBuilder


def _run(path: Path, seed: int, *, slower: float = 1.0, preempted: int = 0, **meta: object) -> Path:
    rng = np.random.default_rng(seed)
    builder = RecordBuilder(run_id=f"run-{path.name}", policy="lru").healthy().meta(**meta)
    for i, ttft_s in enumerate(rng.lognormal(np.log(0.3), 0.3, 200) * slower):
        builder.served(f"chat-{i}", sent_s=11.0 + i * 0.25, ttft_s=float(ttft_s), e2e_s=float(ttft_s) + 0.5)
    for i in range(preempted):
        builder.event("preempted", 20.0 + i, mode="swap", num_blocks=10, request_id=f"chat-{i}")
    return builder.write(path)


@pytest.fixture
def store(tmp_path):
    """Three repeats of the config, saved as CI saves them."""
    runs = [_run(tmp_path / "runs" / f"base-{k}", seed=k) for k in range(3)]
    save_runs(runs, tmp_path / "baselines", "main")
    return tmp_path / "baselines" / "main"


def _gate(run: Path, store: Path, capsys, *options: str) -> tuple[int, dict]:
    code = main(["gate", str(run), "--against", str(store), *options])
    capsys.readouterr()
    return code, json.loads((run / "regression.json").read_text())


def test_a_config_against_three_repeats_of_itself_passes(tmp_path, store, capsys):
    code, regression = _gate(_run(tmp_path / "again", seed=7), store, capsys)
    assert code == 0 and regression["regressions"] == [] and len(regression["baselines"]) == 3
    statuses = {m["metric"]: m["status"] for m in regression["metrics"]}
    assert statuses["ttft_p95.interactive"] == "within the noise"
    assert (tmp_path / "again" / "regression.junit.xml").exists()


def test_a_20_percent_slower_executor_fails_on_ttft(tmp_path, store, capsys):
    code, regression = _gate(_run(tmp_path / "slow", seed=7, slower=1.2), store, capsys)
    assert code == 1 and "ttft_median.interactive" in regression["regressions"]
    junit = (tmp_path / "slow" / "regression.junit.xml").read_text()
    assert 'name="ttft_median.interactive"' in junit and "<failure" in junit
    assert main(["report", str(tmp_path / "slow")]) == 0  # the report opens with the regressions
    html = (tmp_path / "slow" / "report.html").read_text()
    assert html.index('<section id="regressions">') < html.index('<section id="gates">')
    assert "release gate: 1 regression(s) against 3 baseline runs: median TTFT interactive" in html


def test_a_much_smaller_pool_fails_on_preemptions_and_is_named(tmp_path, store, capsys):
    builder_pool = json.loads((store / "lru" / "run-base-0" / "meta.json").read_text())["pool"]
    run = _run(tmp_path / "small", seed=7, preempted=40, pool={**builder_pool, "num_blocks": 600})
    code, regression = _gate(run, store, capsys)
    assert code == 1 and "preemptions" in regression["regressions"]
    assert regression["notes"] == ["pool size (blocks) 600 here, 1000 in the baselines"]


def test_an_external_targets_smaller_pool_is_gated_by_its_own_preemption_counter(tmp_path, capsys):
    # vLLM: no engine events and no configured pool; the pool and preemptions come from /metrics
    # (without kvgate's admin API most gates are not measurable: --allow-partial)
    def external(path: Path, seed: int, num_blocks: int, preempted: int) -> Path:
        counters = {"num_blocks": num_blocks, "num_preemptions": 0.0}
        return _run(
            path,
            seed,
            target={"kind": "external", "url": "http://vllm"},
            pool=None,
            signals={"engine_events": False},
            initial=counters,
            final={**counters, "num_preemptions": float(preempted)},
        )

    runs = [external(tmp_path / "runs" / f"good-{k}", k, 160, 0) for k in range(3)]
    save_runs(runs, tmp_path / "baselines", "main")
    small = external(tmp_path / "small", 7, 48, 25)
    code, regression = _gate(small, tmp_path / "baselines" / "main", capsys, "--allow-partial")
    assert code == 1 and "preemptions" in regression["regressions"]
    assert regression["notes"] == ["pool size (blocks) 48 here, 160 in the baselines"]


def test_runs_under_another_load_are_not_comparable(tmp_path, store, capsys):
    run = _run(tmp_path / "other", seed=7, scenarios=["cancel_storm"])
    assert main(["gate", str(run), "--against", str(store)]) == 2
    regression = json.loads((run / "regression.json").read_text())
    assert not regression["comparable"] and "scenario set" in regression["differences"][0]
    assert "scenario set" in capsys.readouterr().err


def test_a_store_that_is_not_there_is_an_error(tmp_path, capsys):
    run = _run(tmp_path / "c", seed=1)
    assert main(["gate", str(run), "--against", str(tmp_path / "nowhere")]) == 2
    assert "no run record there" in capsys.readouterr().err


def test_baseline_save_keeps_the_newest_runs_of_each_config(tmp_path, capsys):
    runs = [_run(tmp_path / "runs" / f"r{k}", seed=k, started_unix=1_700_000_000.0 + k) for k in range(4)]
    assert main(["baseline", "save", str(tmp_path / "runs"), "--name", "main", "--store", str(tmp_path / "st")]) == 0
    assert (
        main(
            ["baseline", "save", *map(str, runs[2:]), "--name", "main", "--store", str(tmp_path / "st"), "--keep", "2"]
        )
        == 0
    )
    kept = find_runs([tmp_path / "st" / "main"])
    assert [p.name for p in kept] == ["run-r2", "run-r3"] and not (kept[0] / "report.html").exists()
    capsys.readouterr()
