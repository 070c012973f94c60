"""KV cache events published by one engine process, read by the harness's own vLLM subscriber
(harness/collectors/kv_events.py): what it counts is what the engine's prefix cache did."""

from __future__ import annotations

import asyncio

import httpx
import msgspec
import pytest

from harness.collectors.kv_events import KvEventSubscriber
from reference_engine.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from reference_engine.server.kv_event_publisher import HeldBlocks, worker_endpoint
from reference_engine.server.kv_event_wire import decode_batch, encode_batch
from tests.unit.server.server_support import ACME, chat, server_config, serving
from tests.waiting import wait_for

ADMIN = {"Authorization": "Bearer sk-kvgate-admin"}
EVENTS = {"kv_events__enable_kv_cache_events": True, "kv_events__endpoint": "tcp://127.0.0.1:0"}


def test_a_batch_is_vllms_array_like_layout_and_decodes_back():
    events = [BlockStored([2**120, 5], None, [1, 2], 16), BlockRemoved([7]), AllBlocksCleared()]
    payload = encode_batch(1.5, events, rank=3)
    ts, batch, rank = msgspec.msgpack.decode(payload)
    assert (ts, rank) == (1.5, 3) and [e[0] for e in batch] == ["BlockStored", "BlockRemoved", "AllBlocksCleared"]
    assert batch[0][1][0] == (2**120).to_bytes(16, "big") and batch[0][3:6] == [[1, 2], 16, None]
    assert decode_batch(payload) == (1.5, events)


def test_each_worker_publishes_on_its_own_port():
    assert worker_endpoint("tcp://127.0.0.1:5557", 2) == "tcp://127.0.0.1:5559"
    assert worker_endpoint("tcp://127.0.0.1:0", 2) == "tcp://127.0.0.1:0"


@pytest.mark.anyio
async def test_the_harness_subscriber_reads_what_the_engine_stored_and_evicted():
    async with serving(server_config(**EVENTS)) as (client, app):
        workers = (await client.get("/admin/workers", headers=ADMIN)).json()["workers"]
        endpoint = workers[0]["kv_events_endpoint"]
        assert endpoint.startswith("tcp://127.0.0.1:")
        subscriber = KvEventSubscriber(endpoint).start()
        try:
            await _subscribed(client, subscriber)
            log = app.state.kvgate.core.kv_events
            for i in range(14):  # 14 prompts of ~190 blocks each through a 2,048-block pool: evictions
                body = chat(" ".join(f"w{i}x{j}" for j in range(3000)), max_tokens=2)
                assert (await client.post("/v1/chat/completions", json=body, headers=ACME)).status_code == 200
            core = app.state.kvgate.core
            wait_for(lambda: subscriber.stats.blocks_removed > 0, "evictions arrive")
            assert len(log) == 0 and core.pool.num_evicted_cached > 0
            cached = core.pool.num_cached + core.pool.num_live  # hashed blocks: every one announced
            stats = subscriber.stats
            assert stats.num_missed == 0 and subscriber.num_undecodable == 0
            assert stats.blocks_stored - stats.blocks_removed >= core.pool.num_cached
            assert stats.blocks_removed == core.pool.num_evicted_cached and cached > 0
        finally:
            subscriber.stop()


async def _subscribed(client: httpx.AsyncClient, subscriber: KvEventSubscriber) -> None:
    """Send one request at a time until the subscriber sees its batch: a SUB socket that has just
    connected misses what was published before its subscription reached the publisher."""
    for i in range(50):
        await client.post("/v1/chat/completions", json=chat(f"warm up {i} " * 20, max_tokens=1), headers=ACME)
        if subscriber.stats.num_batches:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the subscriber never received a batch")


def test_the_snapshot_holds_what_was_announced_and_not_taken_back_parents_first():
    held = HeldBlocks()
    held.apply([BlockStored([1, 2], None, list(range(32)), 16), BlockStored([3], 2, list(range(32, 48)), 16)])
    held.apply([BlockRemoved([2]), BlockStored([4], None, [9] * 16, 16)])
    assert held.events() == [
        BlockStored([1], None, list(range(16)), 16),
        BlockStored([3], 2, list(range(32, 48)), 16),
        BlockStored([4], None, [9] * 16, 16),
    ]
    held.apply([AllBlocksCleared()])
    assert held.events() == []


@pytest.mark.anyio
async def test_a_worker_serves_its_snapshot_with_the_number_of_the_batch_it_reflects():
    async with serving(server_config(**EVENTS)) as (client, app):
        await client.post("/v1/chat/completions", json=chat("a b c d " * 20, max_tokens=1), headers=ACME)
        resp = await client.get("/admin/kv_events/snapshot", headers=ADMIN)
        _, events = decode_batch(resp.content)
        stored = app.state.kvgate.core.pool
        assert int(resp.headers["x-kvgate-kv-seq"]) >= 0 and len(events) == stored.num_cached + stored.num_live
    async with serving(server_config()) as (client, _):
        assert (await client.get("/admin/kv_events/snapshot", headers=ADMIN)).status_code == 404
