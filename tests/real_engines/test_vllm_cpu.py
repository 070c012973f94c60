"""kvgate against a real `vllm serve` on CPU: the KV gates are *measured* from vLLM's telemetry.

One server for the session (tests/real_engines/conftest.py), three runs: a cancel storm, a tenant burst
and long prompts. Each asserts that cancel_release (where it cancels), memory_recovery,
capacity_after_drain and the prefix hit rate (eviction_thrash, from KV events and counters) are
measured, that the run timed vLLM and sized its load to that speed, and that the cache_salt
probe could tell a hit from a miss; never what the values are: they depend on this machine's
speed. They are printed (`-s`) and kept in `<pytest tmp>/real_engine_values.json` with the other
modules' figures for the record.

    tests/real_engines/setup_vllm_cpu.sh                         # once: /work/vllm-env, the model
    pytest -m real_engine tests/real_engines -s                  # about 15 minutes on two cores
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gates import Outcome, read_verdict
from record.run_record import RunRecord
from tests.real_engines.kvgate_cli import against, kvgate
from tests.real_engines.vllm_server import API_KEY, REAL_ENGINE_TIMEOUT_S, VllmServer

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(REAL_ENGINE_TIMEOUT_S)]

MEASURED = ("memory_recovery", "capacity_after_drain", "eviction_thrash")


def kvgate_run(
    server: VllmServer, run_dir: Path, scenarios: str, users: int, duration_s: int
) -> subprocess.CompletedProcess[str]:
    return kvgate(
        "run",
        *against(server.url),
        "--kv-events",
        server.kv_events,
        "--profile",
        "quick",
        "--scenarios",
        scenarios,
        "--users",
        str(users),
        "--spawn-rate",
        str(users),
        "--duration",
        str(duration_s),
        "--out",
        str(run_dir),
    )


def judged(
    server: VllmServer, tmp_path: Path, values: dict, scenarios: str, users: int, duration_s: int
) -> tuple[RunRecord, dict]:
    run_dir = tmp_path / scenarios
    result = kvgate_run(server, run_dir, scenarios, users, duration_s)
    assert result.returncode in (0, 1), f"kvgate run exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    record = RunRecord.load(run_dir)
    verdict = read_verdict(run_dir)
    assert verdict is not None
    results = {r.gate: r for r in verdict.results}
    values[scenarios] = {
        gate: {
            "outcome": r.outcome.value,
            "value": r.headline.value if r.headline else None,
            "explanation": r.explanation,
        }
        for gate, r in results.items()
    }
    values[scenarios]["collectors"] = {k: v.available for k, v in record.meta.collectors.items()}
    values[scenarios]["cache_salt_probe"] = record.meta.probes.get("cache_salt")
    speed, sizing = record.meta.live["target_speed"], record.meta.live["sizing"]
    values[scenarios]["target_speed"], values[scenarios]["sizing"] = speed, sizing
    assert speed["measured"] is True  # the run timed vLLM before the load, and sized its load to it
    # The key went to the server with every request and scrape; it is written nowhere.
    assert not [p.name for p in run_dir.rglob("*") if p.is_file() and API_KEY in p.read_text(errors="ignore")]
    collectors = record.meta.collectors
    for name in ("prometheus", "pool_state", "prefix_cache_reset", "cache_salt_probe", "kv_events"):
        assert collectors[name].available, f"{name}: {collectors[name].detail}"
    return record, results


def assert_measured(results: dict, *gates: str) -> None:
    unmeasured = {g: results[g].explanation for g in gates if results[g].outcome is Outcome.NOT_MEASURABLE}
    assert not unmeasured


def test_a_cancel_storm_on_vllm_measures_release_recovery_capacity_and_prefix_reuse(
    vllm: VllmServer, tmp_path: Path, values: dict
) -> None:
    record, results = judged(vllm, tmp_path, values, "cancel_storm", users=4, duration_s=25)
    assert_measured(results, "cancel_release", *MEASURED)
    assert results["cancel_release"].evidence["source"].startswith("polled request counts")
    assert record.meta.probes["cache_salt"]["isolated"] is True  # measurable, and vLLM keeps salts apart
    assert record.meta.final["prefix_cache_reset_after_drain"] is True  # nothing leaked
    assert (record.requests["status"] == "cancelled").any()


def test_a_tenant_burst_on_vllm_measures_recovery_and_capacity(vllm: VllmServer, tmp_path: Path, values: dict) -> None:
    record, results = judged(vllm, tmp_path, values, "tenant_burst", users=2, duration_s=20)
    assert_measured(results, *MEASURED)
    assert set(record.requests["tenant"].dropna()) >= {"acme", "globex"}


def test_long_prompts_on_vllm_fill_the_pool_and_it_is_measured_back(
    vllm: VllmServer, tmp_path: Path, values: dict
) -> None:
    record, results = judged(vllm, tmp_path, values, "long_prompt", users=2, duration_s=25)
    assert_measured(results, *MEASURED)
    assert record.samples["usage"].max() > 0  # the long prompts held KV while they ran
