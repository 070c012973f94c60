"""Outside telemetry of a vLLM-like stub: pool state, the reset leak check and the probe in a run."""

from __future__ import annotations

import json

from harness.collectors.prometheus import PrometheusScraper, parse_metrics
from harness.collectors.target_telemetry import TargetTelemetry, scrape_pool_state
from tests.stub_http import stub_server

KEY = "sk-vllm-secret"


def vllm_metrics(usage: float, running: int) -> str:
    return (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {usage}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0\n'
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="128",engine="0",num_gpu_blocks="256",enable_prefix_caching="True"} 1.0\n'
        "# TYPE vllm:request_success counter\n"
        'vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 3.0\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 9.0\n'
    )


def test_vllms_pool_size_and_aborts_are_read_from_its_labels_and_counters() -> None:
    scrape = parse_metrics(vllm_metrics(0.25, 2))
    assert scrape.info == {"num_blocks": 256, "block_tokens": 128} and scrape.counters["num_aborted"] == 3
    assert scrape_pool_state(scrape) == {
        "num_blocks": 256,
        "live_blocks": 64,
        "free_blocks": 192,
        "cached_blocks": 0,
        "retained_blocks": 0,
        "pinned_blocks": 0,
        "pending_blocks": 0,
        "requests_in_engine": 2,
        "usage": 0.25,
        "pool_source": "prometheus",
    }


class FakeVllm:
    """/metrics with a usage that a test sets, /reset_prefix_cache refused while usage > 0."""

    def __init__(self) -> None:
        self.usage = 0.0

    def __call__(self, method: str, path: str) -> tuple[int, bytes]:
        if path == "/metrics":
            return 200, vllm_metrics(self.usage, 0).encode()
        if path == "/reset_prefix_cache":
            return 200, json.dumps({"success": self.usage == 0}).encode()
        return 404, b"{}"


def test_before_the_load_and_after_the_drain_with_a_leak_found() -> None:
    engine, seen = FakeVllm(), []
    with stub_server(engine, seen) as url:
        scraper = PrometheusScraper(f"{url}/metrics", api_key=KEY)
        telemetry = TargetTelemetry(url, scraper, api_key=KEY)
        initial = telemetry.before_load()
        engine.usage = 1 / 256  # one block still held after the drain
        final = telemetry.after_drain()
        telemetry.close()
    assert initial["free_blocks"] == 256 and initial["requests_in_engine"] == 0
    assert final["prefix_cache_reset_after_drain"] is False and final["live_blocks"] == 1
    status = telemetry.statuses()
    assert status["prefix_cache_reset"].available and status["pool_state"].available
    assert not status["kv_events"].available and "--kv-events-config" in status["kv_events"].detail
    assert [p for _, p, _ in seen].count("/reset_prefix_cache") == 2  # the cold start, the leak check
    assert all(h.get("Authorization") == f"Bearer {KEY}" for _, _, h in seen)
