from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from harness.collectors.prometheus import ScrapeError, parse_metrics
from record.run_record import SAMPLE_COLUMNS
from reference_engine import EngineCore
from reference_engine.server.metrics import EngineMetrics
from tests.helpers import small_config

VLLM = """\
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 5.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
"""

SGLANG = """\
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 12.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 3.0
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.0075
"""


def test_the_reference_engines_own_metrics_are_read_with_block_counts() -> None:
    core = EngineCore(small_config(num_blocks=1024))
    scrape = parse_metrics(generate_latest(EngineMetrics(core, "llama-3.1-8b").registry).decode())
    snap = core.snapshot()
    assert scrape.dialect == "kvgate"
    assert scrape.gauges["num_blocks"] == snap.num_blocks == 1024
    assert (scrape.gauges["live_blocks"], scrape.gauges["free_blocks"]) == (snap.live_blocks, snap.free_blocks)
    assert scrape.gauges["usage"] == pytest.approx(snap.usage) and scrape.gauges["num_running"] == 0
    assert {
        "num_preemptions",
        "num_oom",
        "num_evicted_cached_blocks",
        "prefix_cache_queries_tokens",
        "recompute_tokens",
        "computed_tokens",
    } <= set(scrape.counters)
    row = scrape.sample_row(3.0)
    assert row is not None and set(row) <= set(SAMPLE_COLUMNS) and row["source"] == "prometheus"


def test_vllm_names_give_usage_queues_and_counters_without_blocks() -> None:
    scrape = parse_metrics(VLLM)
    assert scrape.dialect == "vllm"
    assert scrape.gauges == {"usage": 0.5, "num_running": 7.0, "num_waiting": 2.0}  # ratio averaged, counts summed
    assert scrape.counters == {
        "num_preemptions": 5.0,
        "prefix_cache_queries_tokens": 1000.0,
        "prefix_cache_hits_tokens": 250.0,
    }
    assert scrape.sample_row(1.0) == {
        "t_s": 1.0,
        "usage": 0.5,
        "num_running": 7.0,
        "num_waiting": 2.0,
        "source": "prometheus",
    }


def test_sglang_names() -> None:
    scrape = parse_metrics(SGLANG)
    assert scrape.dialect == "sglang"
    assert scrape.gauges == {"usage": 0.28, "num_running": 12.0, "num_waiting": 3.0}
    assert scrape.counters == {"prefix_cache_hit_rate": 0.0075}


def test_a_multi_worker_router_is_summed_over_its_workers() -> None:
    text = "\n".join(
        f'kvgate_kv_blocks{{state="live",worker="{w}"}} {10 * (w + 1)}\nkvgate_kv_pool_blocks{{worker="{w}"}} 100'
        for w in range(2)
    )
    scrape = parse_metrics("# TYPE kvgate_kv_blocks gauge\n" + text + "\n")
    assert (scrape.gauges["live_blocks"], scrape.gauges["num_blocks"]) == (30.0, 200.0)
    assert scrape.sample_row(0.0)["usage"] == pytest.approx(0.15)


def test_unknown_metrics_are_recognised_as_nothing() -> None:
    scrape = parse_metrics("# TYPE up gauge\nup 1\n")
    assert scrape.dialect == "" and scrape.sample_row(0.0) is None


def test_text_that_is_not_prometheus_is_a_scrape_error() -> None:
    with pytest.raises(ScrapeError):
        parse_metrics("<html><body>502 Bad Gateway</body></html>\n")
