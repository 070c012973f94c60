"""Helpers of the end-to-end tests: run `kvgate run` and `locust` as a user would (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.run_record import RunRecord

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
DEFAULT_CONFIG = REPO / "configs" / "default.toml"
STATUSES = {"ok", "error", "cancelled", "timeout"}


def clean_env() -> dict[str, str]:
    """The test's environment without KVGATE_* settings that would change what runs."""
    return {k: v for k, v in os.environ.items() if not k.startswith("KVGATE_")}


def kvgate_run(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", *args], cwd=REPO, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout_s)


def locust(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "locust", *args], cwd=REPO, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout_s)


def load_record(result: subprocess.CompletedProcess[str], run_dir: Path) -> RunRecord:
    assert result.returncode in (0, 1), f"kvgate run exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return RunRecord.load(run_dir)


def ttft_gaps_ms(record: RunRecord) -> pd.Series:
    """|client TTFT − engine TTFT| per answered request, joined on the engine's request id (both
    measured from the request's own start: the client's send, the engine's arrival)."""
    first = record.events[record.events["kind"] == "first_token"][["request_id", "latency_s"]]
    first = first.groupby("request_id", as_index=False)["latency_s"].min()
    answered = record.requests.dropna(subset=["ttft_s"])
    joined = answered.merge(first, left_on="engine_request_id", right_on="request_id", how="inner")
    return (joined["ttft_s"] - joined["latency_s"]).abs() * 1000.0
