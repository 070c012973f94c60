"""A target that looks like vLLM (OpenAI routes, only `vllm:` metrics, no admin API) still gets a
record: client rows and Prometheus samples, with every engine-only signal marked absent."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gates import read_verdict
from harness.target import ReferenceEngine, free_port
from tests.e2e.run_support import DEFAULT_CONFIG, REPO, kvgate_run, load_record
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def vllm_like(tmp_path: Path) -> Iterator[str]:
    with ReferenceEngine(DEFAULT_CONFIG, log_path=tmp_path / "engine.log") as engine:
        port = free_port()
        proxy = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tests" / "e2e" / "vllm_like.py"),
                "--upstream",
                engine.url,
                "--port",
                str(port),
            ]
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: _answers(f"{url}/metrics"), "the vLLM stand-in starts", alive=lambda: proxy.poll() is None)
            yield url
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)


def test_a_vllm_named_target_yields_a_record_with_engine_signals_absent(vllm_like: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = kvgate_run(
        "--target",
        vllm_like,
        "--allow-partial",
        "--tenants",
        "acme=sk-acme:interactive,globex=sk-globex:interactive",
        "--profile",
        "quick",
        "--scenarios",
        "short_qa,cancel_storm",
        "--users",
        "4",
        "--duration",
        "5",
        "--out",
        str(run_dir),
    )
    record = load_record(result, run_dir)
    meta = record.meta
    assert (meta.policy, meta.pool, meta.target["kind"], meta.target["model"]) == (
        "external",
        None,
        "external",
        "llama-3.1-8b",
    )
    s = meta.signals
    assert s.client_requests and s.prometheus
    assert not (s.engine_events or s.engine_samples or s.tenant_samples or s.worker_chaos)
    assert any("no engine admin API" in note for note in meta.notes)
    assert record.events.empty and record.tenant_samples.empty
    assert len(record.samples) and set(record.samples["source"]) == {"prometheus"}
    assert record.samples["usage"].notna().all() and record.samples["live_blocks"].isna().all()
    assert "live_blocks" not in meta.final and "num_preemptions" in meta.final  # vllm:num_preemptions_total
    assert set(record.requests["phase"]) == {"baseline", "load"} and (record.requests["status"] == "ok").any()
    verdict = read_verdict(run_dir)
    assert verdict is not None
    for gate in ("tenant_share", "preempted_complete"):
        assert verdict.result(gate).outcome.value == "not_measurable", gate
    # no engine events, but the polled request counts bound each cancel's release from outside
    release = verdict.result("cancel_release")
    assert release.outcome.value != "not_measurable" and release.evidence["source"].startswith("polled")
    assert meta.probes["cache_salt"]["isolated"] is True  # the reference engine behind it keeps salts apart
