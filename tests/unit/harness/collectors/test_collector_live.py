"""LiveCollectors against a target that has only vLLM-named metrics (no admin API, no NVML)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.collectors.live import CollectorSettings, LiveCollectors
from record.run_record import RunRecordWriter
from tests.stub_http import stub_server
from tests.unit.harness.collectors.test_collector_prometheus import VLLM


def vllm_like(method: str, path: str) -> tuple[int, bytes]:
    """Only /metrics, with vLLM's names; everything else 404 (no admin API)."""
    return (200, VLLM.encode()) if path == "/metrics" else (404, b'{"detail":"Not Found"}')


@pytest.fixture
def vllm_url() -> Iterator[str]:
    with stub_server(vllm_like) as url:
        yield url


def test_a_vllm_target_gives_prometheus_samples_and_nothing_engine_only(vllm_url: str, tmp_path: Path) -> None:
    with RunRecordWriter(tmp_path) as writer:
        collectors = LiveCollectors(
            CollectorSettings(base_url=vllm_url, metrics_url=f"{vllm_url}/metrics"), writer, started_unix=0.0
        )
        collectors.sample()
        collectors.sample()
        signals, final, busy = collectors.signals(), collectors.final_state(), collectors.in_flight()
        initial = collectors.initial_state()
        collectors.close()
    assert collectors.admin is None and any("no engine admin API" in n for n in collectors.notes)
    # no admin API and no pool size: only the run's starting counters, no pool state
    assert initial == {"num_preemptions": 5.0, "prefix_cache_queries_tokens": 1000.0, "prefix_cache_hits_tokens": 250.0}
    statuses = collectors.statuses()
    assert not statuses["admin_api"].available and statuses["prometheus"].available
    assert not statuses["pool_state"].available and "num_gpu_blocks" in statuses["pool_state"].detail
    assert not statuses["prefix_cache_reset"].available
    assert signals.prometheus and signals.client_requests
    assert not (signals.engine_events or signals.engine_samples or signals.tenant_samples or signals.worker_chaos)
    assert final == {"num_preemptions": 5.0, "prefix_cache_queries_tokens": 1000.0, "prefix_cache_hits_tokens": 250.0}
    assert busy == 9
    samples = pd.read_csv(tmp_path / "samples.csv")
    assert list(samples["source"]) == ["prometheus", "prometheus"] and list(samples["usage"]) == [0.5, 0.5]
    assert samples["live_blocks"].isna().all() and pd.read_csv(tmp_path / "tenant_samples.csv").empty


def test_a_target_that_answers_nothing_yields_no_signal_but_the_client_view(tmp_path: Path) -> None:
    with RunRecordWriter(tmp_path) as writer:
        collectors = LiveCollectors(CollectorSettings(base_url="http://127.0.0.1:9", metrics_url=""), writer, 0.0)
        collectors.sample()
        assert collectors.final_state() == {} and collectors.in_flight() is None
        assert not collectors.wait_drained(0.0)
        collectors.close()
    s = collectors.signals()
    assert s.client_requests and not (s.engine_events or s.engine_samples or s.prometheus)
