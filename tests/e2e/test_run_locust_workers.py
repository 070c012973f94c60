"""Locust workers that cannot be trusted with the load: one lost mid-run, one that runs another
kvgate or other scenario files, none at all. Against `kvgate serve` started here, on loopback;
asserts exit codes, notes and counts.

A lost worker's unsent load is named and never judged (exit 2), and no row of the survivor is
lost. A refused worker is named with both versions. A master whose workers never come says how
many it waited for, exits 2, and judges nothing.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.target import free_port
from record.run_record import HARNESS_ERROR, RunRecord
from tests.e2e.run_support import REPO, clean_env
from tests.integration.server_process import running_server
from tests.processes import children, descendants
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

TENANTS = "acme=sk-acme,globex=sk-globex"
LOOSE_LAG = ("--max-lag-ms", "5000")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("serve")) as url:
        yield url


def start_kvgate(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def load_rows(run_dir: Path) -> int:
    try:
        rows = pd.read_csv(run_dir / "requests.csv")
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return 0
    return int((rows["phase"] == "load").sum())


def test_a_worker_lost_mid_run_names_what_it_never_sent_and_keeps_every_row_of_the_other(
    server: str, tmp_path: Path
) -> None:
    out = tmp_path / "lost"
    run = start_kvgate(
        "run",
        *("--target", server, "--tenants", TENANTS, "--profile", "quick", "--out", str(out)),
        *("--rate", "20", "--arrivals", "constant", "--duration", "10", "--processes", "2", *LOOSE_LAG),
    )
    try:
        master = wait_for(
            lambda: next((p for p in descendants(run.pid) if "-m locust" in cmdline(p)), None),
            "locust's master runs",
            alive=lambda: run.poll() is None,
        )
        workers = wait_for(lambda: len(kids := children(master)) == 2 and kids, "both locust workers run")
        wait_for(lambda: load_rows(out) >= 20, "the load is under way", alive=lambda: run.poll() is None)
        subprocess.run(["kill", "-KILL", str(workers[1])], check=True)  # a host that went down
        stdout, stderr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 2, stdout + stderr
    record = RunRecord.load(out)
    assert record.meta.harness_error is not None and not (out / "verdict.json").exists()
    summary = record.meta.model_extra["live"]["open_loop"]
    lost = [name for name, sender in summary["senders"].items() if sender["lost"]]
    (survivor,) = set(summary["senders"]) - set(lost)
    assert len(lost) == 1
    unsent = [n for n in record.meta.notes if n.startswith(f"{HARNESS_ERROR}: ") and "never recorded" in n]
    assert len(unsent) == 1 and f"{lost[0]} (lost mid-run)" in unsent[0]
    load = record.requests[record.requests["phase"] == "load"]
    mine = load[load["load_worker"] == survivor]
    assert len(mine) == summary["senders"][survivor]["num_dealt"] and mine["request_id"].is_unique
    assert load["request_id"].is_unique


def other_kvgate_worker(port: int) -> subprocess.Popen[str]:
    """A worker whose kvgate says it is another version (the scenario files are the master's)."""
    code = (
        "import sys; import harness.loadgen.load_workers as w; w.kvgate_version = lambda: '0.0.1-other'; "
        "from locust.main import main; "
        f"sys.argv = ['locust', '--worker', '-f', '-', '--master-host', '127.0.0.1', '--master-port', '{port}']; "
        "main()"
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)


def other_files_worker(port: int, tmp_path: Path) -> subprocess.Popen[str]:
    """A worker that loads its own copy of the open loop's locustfile, one line longer."""
    copy = tmp_path / "open_loop_locustfile.py"
    copy.write_text((REPO / "harness" / "loadgen" / "open_loop_locustfile.py").read_text() + "# changed\n")
    cmd = [sys.executable, "-m", "locust", "--worker", "-f", str(copy), "--master-port", str(port)]
    return subprocess.Popen(cmd, cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("kind", "theirs"), [("version", "kvgate 0.0.1-other"), ("files", "scenario files")])
def test_a_worker_that_runs_something_else_is_refused_naming_both(
    server: str, tmp_path: Path, kind: str, theirs: str
) -> None:
    port, out = free_port(), tmp_path / "refused"
    worker = other_kvgate_worker(port) if kind == "version" else other_files_worker(port, tmp_path)
    master = start_kvgate(
        "run",
        *("--target", server, "--tenants", TENANTS, "--profile", "quick", "--out", str(out)),
        *("--rate", "10", "--duration", "2", "--master-bind", f"127.0.0.1:{port}", "--expect-workers", "1"),
        *("--workers-wait", "15"),
    )
    try:
        _, stderr = master.communicate(timeout=240)
        _, worker_said = worker.communicate(timeout=60)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert master.returncode == 2 and "waited 15 s for 1 locust worker(s); 0 connected and admitted" in stderr
    assert theirs in stderr and "this master runs kvgate" in stderr
    assert worker.returncode == 2 and "refused by the master" in worker_said and theirs in worker_said
    assert not (out / "verdict.json").exists()


def test_a_master_whose_workers_never_come_says_how_many_and_exits_2(server: str, tmp_path: Path) -> None:
    out = tmp_path / "alone"
    master = start_kvgate(
        "run",
        *("--target", server, "--tenants", TENANTS, "--profile", "quick", "--out", str(out)),
        *("--rate", "10", "--duration", "2", "--master-bind", f"127.0.0.1:{free_port()}"),
        *("--expect-workers", "2", "--workers-wait", "3"),
    )
    _, stderr = master.communicate(timeout=240)
    assert master.returncode == 2, stderr
    assert "waited 3 s for 2 locust worker(s); 0 connected and admitted" in stderr
    assert not (out / "verdict.json").exists()
