"""Worker kill against the reference engine with two workers: a worker dies by kill -9 under load,
the record shows it (worker_died, worker_chaos), streams on it end with worker_lost, and no
reservation or block is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates import read_verdict
from harness.profiles import get_profile
from reference_engine import load_config, with_overrides
from reference_engine.memory import MemoryPlan
from tests.e2e.run_support import DEFAULT_CONFIG, kvgate_run, load_record

pytestmark = pytest.mark.slow


def test_a_killed_worker_is_recorded_and_leaves_no_orphans(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = kvgate_run(
        "--policy",
        str(DEFAULT_CONFIG),
        "--profile",
        "quick",
        "--workers",
        "2",
        "--scenarios",
        "worker_kill,short_qa",
        "--users",
        "5",
        "--duration",
        "8",
        "--out",
        str(run_dir),
    )
    record = load_record(result, run_dir)
    meta = record.meta
    assert meta.signals.worker_chaos and meta.target["workers"] == 2
    assert (record.events["kind"] == "worker_died").sum() >= 1
    quick = with_overrides(load_config(DEFAULT_CONFIG), get_profile("quick").engine_overrides)
    num_blocks = MemoryPlan.from_config(quick).num_blocks  # the quick profile's small pool
    assert meta.pool is not None and meta.pool.num_blocks == 2 * num_blocks  # the router sums its workers' pools
    req = record.requests
    assert set(req["worker"].dropna().astype(int)) == {0, 1}
    lost = req[req["error_code"] == "worker_lost"]
    assert (lost["status"] == "error").all()
    assert meta.final["reservations_outstanding"] == 0 and meta.final["orphan_blocks"] == 0
    assert read_verdict(run_dir).result("no_orphans").outcome.value == "pass"
