"""Helpers of the end-to-end tests: run `kvgate run` and `locust` as a user would (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from record.outcomes import Status
from record.run_record import RunRecord

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
DEFAULT_CONFIG = REPO / "configs" / "default.toml"
STATUSES = {status.value for status in Status}


def clean_env() -> dict[str, str]:
    """The test's environment without KVGATE_* settings that would change what runs."""
    return {k: v for k, v in os.environ.items() if not k.startswith("KVGATE_")}


def kvgate_run(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", *args],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def locust(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "locust", *args],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def load_record(result: subprocess.CompletedProcess[str], run_dir: Path) -> RunRecord:
    assert result.returncode in (0, 1), f"kvgate run exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return RunRecord.load(run_dir)


@contextmanager
def cpu_hogs(num: int = 2) -> Iterator[None]:
    """`num` busy-loop processes for the length of the block: the CPU of a busy CI runner. A test
    that runs its load in here asserts counts and states, never timings."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(num)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def engine_arrivals(events: pd.DataFrame) -> dict[str, str]:
    """{client label (X-Request-Id, the harness's request_id): engine request id} of every request
    the engine received (admitted, queued or refused at once)."""
    arrived = events[events["kind"].isin(["admitted", "queued", "rejected"]) & events["client_request_id"].notna()]
    return dict(zip(arrived["client_request_id"], arrived["request_id"]))


def assert_each_scheduled_request_once(record: RunRecord, senders: set[str]) -> None:
    """Every request the master scheduled has exactly one row, with its sender and its lag."""
    load = record.requests[record.requests["phase"] == "load"]
    summary = record.meta.model_extra["live"]["open_loop"]
    assert len(load) == summary["num_scheduled"] == summary["num_sent"] and load["request_id"].is_unique
    assert set(load["load_worker"]) == senders and load["intended_s"].notna().all()
    assert (load["sent_s"] - load["intended_s"] >= -1e-6).all()  # never early: the lag is the sender's own clock
    assert {s: v["num_recorded"] for s, v in summary["senders"].items()} == load.groupby("load_worker").size().to_dict()
    workers = record.meta.model_extra["live"]["load_workers"]
    assert set(workers) == senders and all(w["clock_offset_ms"] is not None for w in workers.values())
    assert not record.meta.harness_error
