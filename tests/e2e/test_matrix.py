"""`kvgate matrix` end to end on the shortest profile: one run record, verdict and report per
config (per repeat), one comparison report that decides, one chart library, and an exit code
decided by the candidates alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gates import Outcome, read_verdict
from record.run_record import RunRecord
from reports.page import LIBRARY_FILE
from tests.e2e.run_support import REPO, clean_env

pytestmark = pytest.mark.slow

BROKEN_CANCEL = "configs/broken/cancel_release.toml"  # deaf to hang-ups: cancel_release fails


def kvgate_matrix(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    # A short, small load: cancels and chat questions, 4 users, 4 s. A cancelled answer would run
    # on for 1,024 tokens (~7 s) on an engine that does not hear the hang-up.
    env = {**clean_env(), "KVGATE_CANCEL_MAX_TOKENS": "1024"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "matrix",
            *args,
            "--profile",
            "quick",
            "--scenarios",
            "cancel_storm,short_qa",
            "--users",
            "4",
            "--duration",
            "4",
            "--out",
            str(out),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_candidates_that_pass_exit_0_whatever_a_baseline_does(tmp_path: Path) -> None:
    out = tmp_path / "matrix"
    result = kvgate_matrix(
        "configs/default.toml", "configs/lru.toml", "configs/multi_queue.toml", "--baseline", BROKEN_CANCEL, out=out
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "configs/lru.toml has the same digest as configs/default.toml" in result.stdout  # run once
    runs = {"default": Outcome.PASS, "multi_queue": Outcome.PASS, "cancel_release": Outcome.FAIL}
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(runs)
    for name, outcome in runs.items():
        run_dir = out / name
        for artifact in (
            "meta.json",
            "requests.csv",
            "events.csv",
            "verdict.json",
            "verdict.junit.xml",
            "report.html",
            "engine_config.json",
        ):
            assert (run_dir / artifact).is_file(), f"{name}/{artifact}"
        assert read_verdict(run_dir).outcome is outcome, name
        assert RunRecord.load(run_dir).meta.live["engine_overrides"]  # the quick profile's small pool
    assert read_verdict(out / "cancel_release").result("cancel_release").outcome is Outcome.FAIL
    comparison = (out / "comparison.html").read_text()
    assert all(read_verdict(out / name).config_digest in comparison for name in runs)
    assert "(baseline)" in result.stdout and "comparison report" in result.stdout


def test_a_candidate_that_fails_a_gate_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "matrix"
    result = kvgate_matrix(BROKEN_CANCEL, out=out)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert read_verdict(out / "cancel_release").result("cancel_release").outcome is Outcome.FAIL
    assert (out / "comparison.html").is_file()


def test_repeats_each_get_a_record_and_the_comparison_decides_among_candidates(tmp_path: Path) -> None:
    out = tmp_path / "matrix"
    result = kvgate_matrix(
        "configs/default.toml", "--baseline", "configs/baselines/none.toml", "--repeat", "2", out=out
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in ("default", "none"):
        for k in (1, 2):
            run_dir = out / name / f"{name}-{k}"
            assert read_verdict(run_dir).outcome is Outcome.PASS, run_dir
            assert RunRecord.load(run_dir).meta.pressure is not None
            assert len((run_dir / "report.html").read_bytes()) < 1_000_000  # page bytes: the library is shared
    assert [p.relative_to(out).as_posix() for p in out.rglob("*.js")] == [LIBRARY_FILE]  # one copy, at the root
    comparison = (out / "comparison.html").read_text()
    assert re.findall(r'<a href="([^"]+)"', comparison)[4:] == [
        "default/default-1/report.html",
        "default/default-2/report.html",
        "none/none-1/report.html",
        "none/none-2/report.html",
    ]  # after the four section anchors
    assert "<th>default</th><th>none (baseline)</th>" in comparison
    lines = result.stdout.splitlines()
    overall = "overall: default (passed every gate in 2 of 2 runs; the only candidate that did)"
    assert overall in lines
    assert "baselines (compared, never chosen): none" in lines
    # four users for four seconds stay far below the evict rung: each run and the matrix say so
    assert result.stdout.count("NEVER REACHED the evict and preempt rungs") == 4
    assert "4 of 4 runs never reached the evict and preempt rungs" in result.stdout
    assert "NOT A COMPARISON OF POLICIES ON EVICTION, PREEMPTION, SWAP, RECOMPUTE, SESSION EXPIRY" in result.stdout
