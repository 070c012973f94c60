"""A target that serves nothing fails, on a real engine too: the fault proxy (tests/fault_proxy.py)
in front of `vllm serve` (CPU) breaks every streamed answer in one way, and `kvgate run` exits 1
with the failing gates named; through the healthy passthrough the same load's answers are all
well formed, and the gates the faults fail pass.

    pytest -m real_engine tests/real_engines/test_vllm_faults.py -s     # ≈ 8 minutes on two cores
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from record.run_record import RunRecord
from tests.fault_proxy import FAILING_GATES, Fault, fault_proxy
from tests.real_engines.kvgate_cli import against, kvgate
from tests.real_engines.vllm_server import REAL_ENGINE_TIMEOUT_S, VllmServer

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(REAL_ENGINE_TIMEOUT_S)]

SMALL_LOAD = ("--profile", "quick", "--scenarios", "short_qa", "--users", "4", "--duration", "8")


def run_through(
    server: VllmServer, fault: Fault, run_dir: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    with fault_proxy(server.url, fault) as url:
        result = kvgate("run", *against(url), *SMALL_LOAD, "--out", str(run_dir), *extra)
    path = run_dir / "verdict.json"  # none when the run ended in a harness error: the exit code says
    verdict = json.loads(path.read_text()) if path.exists() else {"results": []}
    return result, {r["gate"]: r["outcome"] for r in verdict["results"]}


@pytest.mark.parametrize(
    ("fault", "failing"),
    list(FAILING_GATES.items()),
)
def test_a_broken_vllm_fails_with_the_gate_named(
    vllm: VllmServer, fault: Fault, failing: set[str], tmp_path: Path, values: dict
) -> None:
    result, found = run_through(vllm, fault, tmp_path / "run")
    values[f"fault_{fault.value}_on_vllm"] = {
        "exit": result.returncode,
        "failed": sorted(g for g, o in found.items() if o == "fail"),
    }
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert {gate for gate in failing if found[gate] == "fail"} == failing, found
    assert found["no_oom"] in ("pass", "fail")  # the proxy relays /health: the restart watch judges it
    assert ",cancelled," not in (tmp_path / "run" / "requests.csv").read_text()  # open at the stop = unfinished


def test_the_healthy_passthrough_answers_every_request_well_formed(
    vllm: VllmServer, tmp_path: Path, values: dict
) -> None:
    """Whether vLLM on two busy cores meets the TTFT SLO is not this test's business (goodput may
    fail, and a slow answer may still be open at the stop); that the proxy itself breaks nothing
    is: no malformed, empty or failed answer, and explicit_overflow passes."""
    result, found = run_through(vllm, Fault.NONE, tmp_path / "run", "--allow-partial")
    statuses = RunRecord.load(tmp_path / "run").requests["status"].value_counts().to_dict()
    values["fault_none_on_vllm"] = {"exit": result.returncode, "outcomes": found, "statuses": statuses}
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    assert found["explicit_overflow"] == "pass"
    assert statuses.get("ok", 0) > 0 and set(statuses) <= {"ok", "unfinished"}, statuses
