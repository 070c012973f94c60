"""Open-loop load against `kvgate serve` started here, on locust: chat at a rate and a Mooncake
trace on two locust worker processes, a short sweep on two, a client that lags on one.

Bounded in count (a few dozen requests) and time; asserts counts and states. The client-lag
bound is loosened (a shared CI machine may stall the client): the bound's rule itself is
tested in tests/unit/harness/test_load_report.py and test_loadgen_sender.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.replay.loaders import load_trace
from harness.sweep import MIN_STEP_REQUESTS
from record.run_record import RunRecord
from tests.e2e.run_support import REPO, assert_each_scheduled_request_once, clean_env
from tests.integration.server_process import ADMIN_KEY, running_server

pytestmark = pytest.mark.slow

MOONCAKE = REPO / "tests" / "data" / "traces" / "mooncake" / "conversation_trace_head200.jsonl"
TENANTS = "acme=sk-acme,globex=sk-globex"
LOOSE_LAG = ("--max-lag-ms", "5000")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("serve")) as url:
        yield url


def kvgate(*args: str, admin: bool = False) -> subprocess.CompletedProcess[str]:
    """`admin`: give the run the engine's admin key, so its events (prefix hits) are recorded."""
    env = {**clean_env(), **({"KVGATE_ADMIN_KEY": ADMIN_KEY} if admin else {})}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_chat_at_a_rate_on_two_locust_processes_records_every_request_once(server: str, tmp_path: Path) -> None:
    """`kvgate run --rate 20 --duration 20 --processes 2`, shortened."""
    out = tmp_path / "rate"
    result = kvgate(
        "run",
        *("--target", server, "--tenants", TENANTS, "--profile", "quick", "--out", str(out)),
        *("--rate", "20", "--duration", "4", "--processes", "2"),
        *LOOSE_LAG,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    record = RunRecord.load(out)
    assert_each_scheduled_request_once(record, {"w0", "w1"})
    assert record.meta.model_extra["live"]["open_loop"]["num_scheduled"] >= 40  # Poisson at 20/s for 4 s


def test_a_mooncake_trace_runs_live_and_is_judged(server: str, tmp_path: Path) -> None:
    out = tmp_path / "trace"
    result = kvgate(
        "run",
        "--target",
        server,
        "--tenants",
        TENANTS,
        "--profile",
        "quick",
        "--out",
        str(out),
        "--trace",
        str(MOONCAKE),
        "--rate-scale",
        "2",
        "--limit",
        "24",
        "--duration",
        "60",
        "--processes",
        "2",
        *LOOSE_LAG,
        admin=True,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    record = RunRecord.load(out)
    assert_each_scheduled_request_once(record, {"w0", "w1"})
    load = record.requests[record.requests["phase"] == "load"]
    assert len(load) == 24 and load["intended_s"].notna().all()
    assert set(load["scenario"]) == {"trace_mooncake"} and record.meta.scenarios == ["trace_mooncake"]
    summary = record.meta.model_extra["live"]["open_loop"]
    assert summary["num_sent"] == 24 and summary["client_lag"]["num_requests"] == 24
    # the reference engine counts a word as a token: the trace's prompt lengths arrive exactly
    lengths = {f"trace_mooncake-{r.row}": r.num_prompt_tokens for r in load_trace(MOONCAKE, limit=24).requests}
    answered = load[load["status"] == "ok"]
    assert len(answered) and all(lengths[rid] == n for rid, n in zip(answered["request_id"], answered["prompt_tokens"]))
    assert (out / "verdict.json").exists() and (out / "report.html").exists()
    # the trace's shared hash ids reached the engine as shared prefixes: whole 512-token blocks hit
    hits = record.events[(record.events["kind"] == "scheduled") & (record.events["num_tokens"] >= 512)]
    assert record.meta.signals.engine_events and len(hits)


def test_a_lagging_client_is_a_harness_error_not_a_verdict(server: str, tmp_path: Path) -> None:
    """A bound no client can meet (a thousandth of a millisecond, 40 requests at one instant)."""
    out = tmp_path / "lagged"
    result = kvgate(
        "run",
        "--target",
        server,
        "--tenants",
        TENANTS,
        "--profile",
        "quick",
        "--out",
        str(out),
        "--rate",
        "40",
        "--arrivals",
        "bursts",
        "--burst-size",
        "40",
        "--limit",
        "40",
        "--duration",
        "5",
        "--max-lag-ms",
        "0.001",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "harness error: the client could not keep its schedule" in result.stderr
    assert RunRecord.load(out).meta.harness_error is not None and not (out / "verdict.json").exists()


def test_a_short_sweep_reports_its_highest_passing_rate(server: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    result = kvgate(
        "sweep",
        "--target",
        server,
        "--tenants",
        TENANTS,
        "--rates",
        "4,8",  # 3 s at 4/s is 12 requests, too few: that step lasts 5 s
        "--arrivals",
        "constant",
        "--duration",
        "3",
        "--processes",
        "2",
        "--out",
        str(out),
        *LOOSE_LAG,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sweep = json.loads((out / "sweep.json").read_text())
    for step in sweep["steps"]:
        assert_each_scheduled_request_once(RunRecord.load(step["run_dir"]), {"w0", "w1"})
    steps = sweep["steps"]
    # constant arrivals: rate x duration, the slow step stretched to offer MIN_STEP_REQUESTS
    assert [s["num_sent"] for s in steps] == [MIN_STEP_REQUESTS, 24][: len(steps)]
    best = sweep["highest_passing_rate_per_s"]
    assert best in (4, 8) and all(s["outcome"] == "pass" for s in steps if s["rate_per_s"] <= best)
    assert (out / "sweep.html").exists() and all((Path(s["run_dir"]) / "verdict.json").exists() for s in steps)
