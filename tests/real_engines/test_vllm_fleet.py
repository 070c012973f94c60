"""A fleet of real engines: two `vllm serve` (CPU) replicas behind nginx, judged replica by replica.

kvgate reads each replica's /metrics and KV cache events on its own (`--replica
URL,kv-events=...`) while the load goes through nginx (long prompts: a chat question is shorter
than one of vLLM's 128-token CPU blocks, so it stores none); one replica is killed (its whole process
group) once the load runs, and is not started again (loading takes minutes here): its restart
watch sees it go and never come back, on that replica only, and no_oom fails naming it. Two
vLLMs on two cores are slow, so the load is a couple of users for a few seconds.

    apt-get install -y nginx                                          # the gateway (Debian package)
    pytest -m real_engine tests/real_engines/test_vllm_fleet.py -s    # two vLLM starts, one short run
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from gates import Outcome, read_verdict
from record.fleet import replica_summary
from record.run_record import RunRecord
from tests.e2e.run_support import REPO, clean_env
from tests.gateway import nginx_gateway
from tests.real_engines.conftest import ENV_DIR, MODEL_DIR
from tests.real_engines.kvgate_cli import LOAD, TIMEOUT_S, against
from tests.real_engines.vllm_server import API_KEY, REAL_ENGINE_TIMEOUT_S, VllmServer, missing
from tests.waiting import wait_for

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(REAL_ENGINE_TIMEOUT_S)]

NAMES = ("a", "b")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, VllmServer]]:
    """Two `vllm serve`, started together (each takes minutes to load on these cores)."""
    if why := missing(ENV_DIR, MODEL_DIR):
        pytest.skip(why)
    if shutil.which("nginx") is None:
        pytest.skip("no nginx: apt-get install -y nginx (the gateway in front of the replicas)")
    logs = tmp_path_factory.mktemp("vllm-fleet")
    servers = {name: VllmServer(ENV_DIR, MODEL_DIR, logs / f"vllm-{name}.log") for name in NAMES}
    with ExitStack() as stack:
        for server in servers.values():
            stack.callback(server.stop)
        with ThreadPoolExecutor(len(servers)) as pool:
            list(pool.map(VllmServer.__enter__, servers.values()))
        yield servers


def test_two_vllm_replicas_behind_nginx_are_read_and_judged_each(
    replicas: dict[str, VllmServer], tmp_path: Path, values: dict
) -> None:
    run_dir = tmp_path / "run"
    with nginx_gateway([s.url for s in replicas.values()], tmp_path / "nginx") as url:
        args = [
            *against(url),
            *(a for name, s in replicas.items() for a in ("--replica", f"{s.url},kv-events={s.kv_events},name={name}")),
            *("--profile", "quick", "--scenarios", "long_prompt", "--users", "2", "--spawn-rate", "2"),
            *("--duration", "20", "--out", str(run_dir)),
        ]
        run = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", *args],
            cwd=REPO,
            env={**clean_env(), **LOAD},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            running = lambda: run.poll() is None  # noqa: E731
            wait_for(lambda: _load_answers(run_dir) >= 2, "the load is answered", alive=running, bound_s=TIMEOUT_S)
            victim = replicas["b"].process
            assert victim is not None
            os.killpg(victim.pid, signal.SIGKILL)  # vllm serve and its engine core, as a crash
            victim.wait()
            stdout, stderr = run.communicate(timeout=TIMEOUT_S)
        finally:
            if run.poll() is None:
                run.kill()
    print(stdout[-6000:])
    assert run.returncode in (0, 1), f"kvgate run exited {run.returncode}:\n{stdout}\n{stderr}"
    record = RunRecord.load(run_dir)
    verdict = read_verdict(run_dir)
    assert verdict is not None
    summary = replica_summary(record).set_index("replica")
    values["fleet"] = {
        "summary": summary.reset_index().to_dict("records"),
        "gates": {r.gate: {"outcome": r.outcome.value, "explanation": r.explanation} for r in verdict.results},
        "replica_collectors": {
            name: {k: v.available for k, v in statuses.items()}
            for name, statuses in record.meta.replica_collectors.items()
        },
        "samples": {
            f"{name}/{source}": n
            for (name, source), n in record.replica_samples.groupby("replica")["source"].value_counts().items()
        },
    }
    # each replica read on its own: samples, its pool, its KV events
    assert list(record.replicas["replica"]) == list(NAMES)
    assert set(record.replica_samples["replica"]) == set(NAMES)
    a = record.meta.replica_collectors["a"]
    for source in ("prometheus", "pool_state", "kv_events", "engine_restarts"):
        assert a[source].available, f"a: {source}: {a[source].detail}"
    assert record.replicas.set_index("replica").at["a", "kv_blocks_stored"] > 0  # its events arrived
    # the killed replica's restart shows on it alone, and the verdict names it
    restarts = record.events[record.events["kind"] == "engine_restart"]
    assert set(restarts["replica"]) == {"b"}
    assert summary.at["a", "restarts"] == 0 and summary.at["b", "restarts"] >= 1
    no_oom = verdict.result("no_oom")
    assert no_oom.outcome is Outcome.FAIL and "failed on b" in no_oom.explanation
    assert no_oom.evidence["replicas"]["a"]["outcome"] == "pass"
    for gate in ("memory_recovery", "capacity_after_drain"):
        assert set(verdict.result(gate).evidence["replicas"]) == set(NAMES)
    # the key went to both replicas with every request and scrape; it is written nowhere
    assert not [p.name for p in run_dir.rglob("*") if p.is_file() and API_KEY in p.read_text(errors="ignore")]


def _load_answers(run_dir: Path) -> int:
    path = run_dir / "requests.csv"
    return (
        sum(1 for line in path.read_text().splitlines() if ",load," in line and ",ok," in line) if path.exists() else 0
    )
