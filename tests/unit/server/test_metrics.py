"""/metrics agrees with the engine's own state and event log, under kvgate's and vLLM's names."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from record.events import Event, EventKind
from reference_engine.core.engine import EngineCore
from reference_engine.executors.base import Tier
from reference_engine.server.metrics import EngineMetrics
from tests.helpers import distinct_prompts, serve_rounds, small_config, tiered_driver
from tests.unit.server.server_support import ACME, ADMIN, chat, server_config, serving

pytestmark = pytest.mark.anyio


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: dict, name: str, **labels: str) -> float:
    return metrics[(name, frozenset(labels.items()))]


async def test_metrics_match_the_engine_state_and_events():
    async with serving(server_config()) as (client, app):
        core = app.state.kvgate.core
        headers = {**ACME, "X-Session-Id": "kept"}
        for _ in range(3):
            assert (
                await client.post(
                    "/v1/chat/completions", json=chat(" ".join(["q"] * 40), max_tokens=5), headers=headers
                )
            ).status_code == 200
        refused = await client.post("/v1/chat/completions", json=chat(max_tokens=10**9), headers=ACME)
        assert refused.status_code == 400
        m = samples((await client.get("/metrics", headers=ADMIN)).text)
        snap = core.snapshot()
        events = list(core.events)

        assert value(m, "kvgate_kv_blocks", state="live") == snap.live_blocks == core.pool.num_live
        assert value(m, "kvgate_kv_blocks", state="retained") == snap.retained_blocks > 0
        assert value(m, "kvgate_kv_blocks", state="cached") == snap.cached_blocks
        assert value(m, "kvgate_kv_blocks", state="free") == snap.free_blocks
        assert value(m, "vllm:kv_cache_usage_perc", model_name="llama-3.1-8b") == pytest.approx(snap.usage)
        assert 0 < snap.usage < 1
        assert value(m, "kvgate_tenant_live_blocks", tenant="acme") == snap.tenant_live_blocks["acme"]
        assert value(m, "kvgate_tenant_kv_share", tenant="acme") == pytest.approx(snap.tenant_share("acme"))
        assert value(m, "kvgate_queue_depth", traffic_class="batch") == 0
        assert value(m, "vllm:num_requests_running", model_name="llama-3.1-8b") == 0
        assert value(m, "kvgate_admissions_total", tenant="acme", traffic_class="interactive", outcome="admitted") == 3
        assert value(m, "kvgate_rejections_total", tenant="acme", reason="context_length_exceeded") == 1
        first_tokens = [e for e in events if e.kind is EventKind.FIRST_TOKEN]
        assert value(m, "vllm:time_to_first_token_seconds_count", model_name="llama-3.1-8b") == len(first_tokens)
        assert value(m, "kvgate_time_to_first_token_seconds_sum", traffic_class="interactive") == pytest.approx(
            sum(e.latency_s for e in first_tokens)
        )
        bt, model = core.pool.block_tokens, "llama-3.1-8b"
        assert value(m, "vllm:prefix_cache_queries_total", model_name=model) == core.pool.num_prefix_queries * bt
        assert value(m, "vllm:prefix_cache_hits_total", model_name=model) == core.pool.num_prefix_hits * bt > 0
        assert value(m, "kvgate_requests_finished_total", tenant="acme", reason="length") == 3
        assert value(m, "kvgate_engine_step_lag_seconds_count") > 0


async def test_cancellations_land_in_the_release_latency_histogram():
    async with serving(server_config()) as (client, app):
        loop = app.state.kvgate.loop
        stream = loop.submit(tenant="acme", prompt_token_ids=list(range(30)), max_new_tokens=500, streaming=True)
        while len(stream.request.output_token_ids) < 2:
            await stream.wait(len(stream.request.output_token_ids))
        loop.abort(stream)
        while not stream.finished:
            await stream.wait(10**9)
        m = samples((await client.get("/metrics", headers=ADMIN)).text)
        assert value(m, "kvgate_cancel_release_latency_seconds_count") == 1
        assert value(m, "kvgate_requests_finished_total", tenant="acme", reason="cancelled") == 1


def test_every_event_kind_updates_the_metrics_without_error():
    """One event of each kind, each column filled as the catalogue says (record/events.py)."""
    metrics = EngineMetrics(EngineCore(small_config()), "m")
    metrics.on_events(
        [
            Event(
                i,
                1.0,
                kind,
                request_id="r",
                tenant="acme",
                traffic_class="interactive",
                num_blocks=2,
                num_tokens=3,
                latency_s=0.5,
                deadline_s=9.0,
                tenant_live_blocks=4,
                num_bytes=4096,
                usage=0.9,
                reason="stop",
                mode="swap",
            )
            for i, kind in enumerate(EventKind)
        ]
    )
    assert metrics.registry.get_sample_value("kvgate_swap_out_bytes_total") == 4096


def test_tier_metrics_use_vllm_offloading_names():
    """With a host tier, loads and demotions show under vLLM's offloading names and per tier."""
    d = tiered_driver(host_gib=4.0)
    serve_rounds(d, distinct_prompts(12))
    core, tiers = d.core, d.core.tiers
    host = tiers.counters[Tier.HOST]
    m = samples(EngineMetrics(core, "m").render(with_tenants=False).decode())
    bt = core.pool.block_tokens
    assert value(m, "vllm:external_prefix_cache_hits_total", model_name="m") == host.promoted * bt > 0
    assert value(m, "vllm:external_prefix_cache_queries_total", model_name="m") >= host.promoted * bt
    moved = value(m, "vllm:kv_offload_total_bytes_total", model_name="m", transfer_type="GPU_to_CPU")
    assert moved == host.demoted * tiers.block_bytes
    assert value(m, "vllm:kv_offload_total_time_total", model_name="m", transfer_type="CPU_to_GPU") == host.load_s
    assert value(m, "kvgate_kv_tier_promoted_blocks_total", tier="host") == host.promoted
    assert value(m, "kvgate_kv_tier_usage_perc", tier="host") == pytest.approx(
        tiers.used_blocks(Tier.HOST) / tiers.capacity_blocks(Tier.HOST)
    )
    assert 0 < value(m, "vllm:kv_offload_cpu_cache_usage_perc", model_name="m") < 1
