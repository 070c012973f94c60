"""A fleet behind a gateway: two reference-engine servers behind nginx (or the test proxy),
`kvgate run --target GATEWAY --replica A --replica B` reads each on its own and judges each.

One replica is killed (its whole process group, as a crash) while the load runs and started
again on its port: the record shows the restart on that replica only, the gap in its metrics
leaves its windowed gates not measurable, no_oom fails naming it, and the other replica and
the run go on. A replica that does not answer before the run is a harness error naming it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gates import Outcome, read_verdict
from harness.profiles import get_profile
from harness.target import ReferenceEngine, free_port
from record.fleet import replica_summary
from record.run_record import MISSING_SOURCE, RunRecord
from reference_engine import load_config, with_overrides
from reference_engine.config import save_config
from tests.e2e.run_support import DEFAULT_CONFIG, REPO, clean_env, kvgate_run
from tests.gateway import gateway
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

ADMIN_KEY = "sk-fleet-admin-0123456789"


@dataclass
class Fleet:
    """Two `kvgate serve` behind a gateway; `start(name, port)` starts a replica (again)."""

    config: Path
    stack: ExitStack
    workdir: Path
    engines: dict[str, ReferenceEngine] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    gateway: str = ""

    def start(self, name: str, port: int = 0) -> None:
        engine = ReferenceEngine(self.config, admin_key=ADMIN_KEY, log_path=self.workdir / f"{name}.log", port=port)
        self.urls[name], self.engines[name] = self.stack.enter_context(engine).url, engine

    def replica_args(self) -> list[str]:
        return [arg for name, url in self.urls.items() for arg in ("--replica", f"{url},name={name}")]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """Two replicas of default.toml at the quick profile's size, behind a gateway."""
    config = with_overrides(load_config(DEFAULT_CONFIG), get_profile("quick").engine_overrides)
    path = save_config(config, tmp_path / "engine.json")  # holds the tenants' keys: test-only, in tmp
    with ExitStack() as stack:
        fleet = Fleet(path, stack, tmp_path)
        for name in "ab":
            fleet.start(name)
        fleet.gateway = stack.enter_context(gateway(list(fleet.urls.values()), tmp_path / "gateway"))
        yield fleet


def test_each_replica_is_read_and_judged_and_a_killed_one_shows_only_in_its_own_restarts(
    fleet: Fleet, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    args = [
        *("--target", fleet.gateway, "--policy", str(DEFAULT_CONFIG), *fleet.replica_args()),
        *("--profile", "quick", "--scenarios", "short_qa,long_prompt", "--users", "6", "--duration", "12"),
        *("--out", str(run_dir)),
    ]
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", *args],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _load_rows(run_dir) >= 10, "the load reaches the replicas", alive=lambda: run.poll() is None)
        victim = fleet.engines["b"].process
        assert victim is not None
        os.killpg(victim.pid, signal.SIGKILL)  # b and every process of its group, as a crash
        victim.wait()
        wait_for(
            lambda: _missing(run_dir, "b") >= 2, "the run sees b's metrics vanish", alive=lambda: run.poll() is None
        )
        fleet.start("b", port=int(fleet.urls["b"].rsplit(":", 1)[1]))  # where the gateway sends b's share
        stdout, stderr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, f"kvgate run exited {run.returncode}:\n{stdout}\n{stderr}"
    record = RunRecord.load(run_dir)

    # per-replica telemetry, columnar: samples, pools, the run's counters, restarts
    assert list(record.replicas["replica"]) == ["a", "b"]
    samples = record.replica_samples
    assert set(samples["replica"]) == {"a", "b"}
    assert not (samples.loc[samples["replica"] == "a", "source"] == MISSING_SOURCE).any()
    assert (samples.loc[samples["replica"] == "b", "source"] == MISSING_SOURCE).sum() >= 2
    assert (samples.loc[samples["source"] != MISSING_SOURCE, "num_blocks"] > 0).all()
    assert (record.samples["source"] == "fleet").all() and len(record.samples) > 0
    restarts = record.events[record.events["kind"] == "engine_restart"]
    assert len(restarts) >= 1 and set(restarts["replica"]) == {"b"}  # only the killed replica restarted
    summary = replica_summary(record).set_index("replica")
    assert summary.at["a", "restarts"] == 0 and summary.at["b", "restarts"] >= 1
    assert summary.at["fleet", "restarts"] == summary.at["b", "restarts"]
    replicas = record.replicas.set_index("replica")
    assert replicas.at["a", "prefix_cache_queries_tokens"] > 0 and replicas.at["a", "num_samples_missed"] == 0
    assert record.meta.final["prefix_cache_queries_tokens"] == pytest.approx(
        replicas["prefix_cache_queries_tokens"].sum()
    )  # the fleet's counters: its replicas' increases over the run, summed
    assert set(record.meta.replica_collectors) == {"a", "b"}
    assert record.meta.replica_collectors["a"]["engine_restarts"].available

    # judged per replica: the verdict names the replica that failed
    verdict = read_verdict(run_dir)
    assert verdict is not None
    no_oom = verdict.result("no_oom")
    assert no_oom.outcome is Outcome.FAIL and "failed on b" in no_oom.explanation
    assert no_oom.evidence["replicas"]["a"]["outcome"] == "pass"
    recovery = verdict.result("memory_recovery")
    assert recovery.outcome is Outcome.NOT_MEASURABLE  # b's metrics were missing under load
    assert recovery.evidence["replicas"]["b"]["outcome"] == "not_measurable"
    assert recovery.evidence["replicas"]["a"]["outcome"] != "not_measurable"
    capacity = verdict.result("capacity_after_drain")
    assert set(capacity.evidence["replicas"]) == {"a", "b"}
    assert capacity.evidence["replicas"]["a"]["outcome"] == "pass"
    report = (run_dir / "report.html").read_text()
    assert "Replicas side by side" in report and "fig-replica-usage" in report


def test_a_replica_that_does_not_answer_at_preflight_is_named_in_one_line(fleet: Fleet, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    result = kvgate_run(
        *("--target", fleet.gateway, "--policy", str(DEFAULT_CONFIG)),
        *("--replica", f"{fleet.urls['a']},name=a", "--replica", f"{dead},name=ghost"),
        *("--profile", "quick", "--out", str(tmp_path / "run")),
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("kvgate:")]
    assert len(lines) == 1 and "replica ghost is unreachable" in lines[0] and dead in lines[0]
    assert not (tmp_path / "run").exists()  # nothing was recorded


def _load_rows(run_dir: Path) -> int:
    path = run_dir / "requests.csv"
    return path.read_text().count(",load,") if path.exists() else 0


def _missing(run_dir: Path, replica: str) -> int:
    path = run_dir / "replica_samples.csv"
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.startswith(f"{replica},") and MISSING_SOURCE in line)
