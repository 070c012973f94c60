"""A target that looks like vLLM (OpenAI routes, only `vllm:` metrics, no admin API) still gets a
record: client rows and Prometheus samples, with every engine-only signal marked absent; where
it states its pool, tenant_share judges the client's estimate, and no_oom its outside witnesses."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def stand_in(tmp_path: Path, *extra: str) -> Iterator[str]:
    with ReferenceEngine(DEFAULT_CONFIG, log_path=tmp_path / "engine.log") as engine:
        port = free_port()
        script = str(REPO / "tests" / "e2e" / "vllm_like.py")
        proxy = subprocess.Popen([sys.executable, script, "--upstream", engine.url, "--port", str(port), *extra])
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: _answers(f"{url}/metrics"), "the vLLM stand-in starts", alive=lambda: proxy.poll() is None)
            yield url
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)


SHORT_RUN = ("--profile", "quick", "--users", "4", "--duration", "5", "--allow-partial")
"""The load both tests drive: short, with the quick profile's pressure, a record even if partial."""
TENANTS = ("--tenants", "acme=sk-acme:interactive,globex=sk-globex:interactive")


def run_against(url: str, run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`kvgate run` of SHORT_RUN by two interactive tenants against the stand-in at `url`; the
    tests differ only in `extra` (scenarios, caps, the target's log)."""
    return kvgate_run("--target", url, "--out", str(run_dir), *TENANTS, *SHORT_RUN, *extra)


@pytest.fixture
def vllm_like(tmp_path: Path) -> Iterator[str]:
    with stand_in(tmp_path) as url:
        yield url


def test_a_vllm_named_target_yields_a_record_with_engine_signals_absent(vllm_like: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run_against(vllm_like, run_dir, "--scenarios", "short_qa,cancel_storm")
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


SECRET = "sk-logged-0123456789abcdef"


def when_the_load_runs(run_dir: Path, act: Callable[[], None]) -> threading.Thread:
    """Call `act` once the run has written its first request row (its collectors run by then)."""

    def loaded() -> bool:
        rows = run_dir / "requests.csv"
        return rows.exists() and len(rows.read_text().splitlines()) > 1

    def wait_then_act() -> None:
        wait_for(loaded, "the run's first request row", bound_s=110)
        act()

    thread = threading.Thread(target=wait_then_act, daemon=True)
    thread.start()
    return thread


def test_a_vllm_target_that_states_its_pool_gets_tenant_and_oom_verdicts_from_outside(tmp_path: Path) -> None:
    run_dir, log = tmp_path / "run", tmp_path / "vllm.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory (a line from before the run)\n")

    def oom() -> None:
        with log.open("a") as f:
            f.write(f"key {SECRET}: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")

    with stand_in(tmp_path, "--block-size", "16") as url:
        writer = when_the_load_runs(run_dir, oom)
        result = run_against(url, run_dir, "--scenarios", "short_qa", "--tenant-caps", "0.5", "--target-log", str(log))
        writer.join(timeout=5)
    record = load_record(result, run_dir)
    collectors = record.meta.collectors
    assert all(collectors[k].available for k in ("tenant_estimate", "engine_restarts", "target_log", "preemptions"))
    estimate = record.tenant_samples
    assert len(estimate) and set(estimate["source"]) == {"client_estimate"} and set(estimate["cap"]) == {0.5}
    assert estimate["live_blocks"].max() > 0
    verdict = read_verdict(run_dir)
    assert verdict is not None
    share = verdict.result("tenant_share")
    assert share.outcome.value != "not_measurable" and share.evidence["source"] == "client_estimate"
    assert share.sources == ("per-tenant KV estimated from the client's in-flight requests",)
    no_oom = verdict.result("no_oom")
    assert no_oom.outcome.value == "fail" and no_oom.evidence["counts"]["OOM lines in the target's log"] == 1
    assert no_oom.evidence["counts"]["engine restarts (possible OOM)"] == 0
    assert "OOM patterns in the target's log (--target-log)" in no_oom.sources
    assert not any(SECRET in path.read_text(errors="replace") for path in run_dir.rglob("*") if path.is_file())
