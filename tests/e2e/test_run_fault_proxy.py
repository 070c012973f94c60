"""A target that serves nothing fails: `kvgate run --target` through the fault proxy in front of
`kvgate serve` exits 1 with the failing gates named, for every fault; the healthy passthrough
passes on the gates it can measure (a server without kvgate's engine telemetry leaves half of
them unmeasurable, and says so; no_oom rests on the restart watch, the proxy relaying /health)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.target import ReferenceEngine
from tests.e2e.run_support import DEFAULT_CONFIG, REPO, clean_env, kvgate_run
from tests.fault_proxy import FAILING_GATES, Fault, fault_proxy

pytestmark = pytest.mark.slow

TENANTS = "acme=sk-acme:interactive,globex=sk-globex:interactive"
SMALL_LOAD = ("--profile", "quick", "--scenarios", "short_qa", "--users", "4", "--duration", "4")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ReferenceEngine(DEFAULT_CONFIG, log_path=tmp_path_factory.mktemp("engine") / "engine.log") as target:
        yield target.url


def run_through(engine: str, fault: Fault, run_dir: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    with fault_proxy(engine, fault) as url:
        result = kvgate_run(
            "--target", url, "--tenants", TENANTS, *SMALL_LOAD, "--out", str(run_dir), *extra, timeout_s=240
        )
    verdict = json.loads((run_dir / "verdict.json").read_text()) if (run_dir / "verdict.json").exists() else {}
    return result, verdict


def outcomes(verdict: dict) -> dict[str, str]:
    return {r["gate"]: r["outcome"] for r in verdict["results"]}


RESTART_WATCH = "engine restarts seen from outside (process start time, /health)"


def no_oom_sources(verdict: dict) -> list[str]:
    return next(r["sources"] for r in verdict["results"] if r["gate"] == "no_oom")


@pytest.mark.parametrize(
    ("fault", "failing"),
    list(FAILING_GATES.items()),
)
def test_a_target_that_serves_nothing_fails_with_the_gate_named(
    engine: str, fault: Fault, failing: set[str], tmp_path: Path
) -> None:
    result, verdict = run_through(engine, fault, tmp_path / "run")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    found = outcomes(verdict)
    assert {gate for gate in failing if found[gate] == "fail"} == failing, found
    # the client alone cannot show there was no OOM; the proxy relays /health, and the restart
    # watch saw the engine stay up: that is what no_oom rests on, and says so
    assert RESTART_WATCH in no_oom_sources(verdict) and found["no_oom"] in ("pass", "fail")
    for gate in failing:
        assert gate in result.stdout
    requests = (tmp_path / "run" / "requests.csv").read_text()
    assert ",cancelled," not in requests  # the load cancels nothing: an open request at the stop is unfinished


def test_the_healthy_passthrough_passes_on_the_gates_it_can_measure(engine: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result, verdict = run_through(engine, Fault.NONE, run_dir, "--allow-partial", "--require", "cancel_release")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]  # required, not measurable
    found = outcomes(verdict)
    assert found["cancel_release"] == "fail" and "required but not measurable" in result.stdout
    assert {gate for gate, outcome in found.items() if outcome == "fail"} == {"cancel_release"}
    assert found["goodput"] == found["explicit_overflow"] == "pass" and found["no_oom"] == "pass"
    assert RESTART_WATCH in no_oom_sources(verdict)  # /health stayed up: not the client's word alone

    def gate(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", "gate", str(run_dir), *extra],
            cwd=REPO,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    # the restart watch makes no_oom measurable from outside: half the gates are measured, which
    # is no partial verdict (that needs most of them unmeasurable: tests/unit/gates/test_gate_verdict.py)
    judged = gate()
    assert judged.returncode == 0 and "PASS" in judged.stdout, judged.stdout + judged.stderr
    assert "partial" not in judged.stdout + judged.stderr
