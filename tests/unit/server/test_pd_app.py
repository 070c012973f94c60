"""A served P/D pair (reference_engine/server/pd_app.py, pd_loop.py): an answer follows its request
from the prefill side through the transfer to the decode side, each side is a replica at its own
path, and a cancel, a failed transfer or a decode-side refusal leaves both pools as they were.
In-process on the real clock: counts and states, never wall time."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest

from reference_engine.core.pd import PDCore, PdRequest, PdState
from reference_engine.server.pd_app import create_pd_app
from tests.unit.server.server_support import ACME, ADMIN, MODEL, chat, server_config, serving

pytestmark = pytest.mark.anyio
PROMPT = "the cache keeps every block " * 40  # a few blocks worth pulling


def pd_config(**overrides: Any):
    return server_config(pd__enabled=True, **overrides)


async def events(client: httpx.AsyncClient) -> list[dict]:
    page = (await client.get("/admin/events", headers=ADMIN)).json()
    return [dict(zip(page["columns"], row, strict=True)) for row in page["rows"]]


async def transferring(pd: PDCore) -> list[PdRequest]:
    """The requests on the link, once there are any (a state, awaited: the suite's timeout bounds it)."""
    while not (pending := [r for r in pd.requests.values() if r.state is PdState.TRANSFERRING]):
        await asyncio.sleep(0.005)
    return pending


async def live_blocks(client: httpx.AsyncClient) -> dict[int, int]:
    snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
    return {int(w): s["live_blocks"] for w, s in snap["workers"].items()}


async def test_an_answer_streams_from_the_decode_side_after_the_transfer() -> None:
    async with serving(pd_config(), create_pd_app) as (client, _):
        before = await live_blocks(client)
        resp = await client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT, 8, stream=True))
        assert resp.status_code == 200
        chunks = [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: {")]
        assert sum(bool(c["choices"] and c["choices"][0]["delta"].get("content")) for c in chunks) == 8
        rid = resp.headers["x-request-id"]
        mine = [(e["worker"], e["kind"]) for e in await events(client) if e["request_id"] == rid]
        assert [k for w, k in mine if w == 0][:2] == ["admitted", "scheduled"] and (0, "finished") in mine
        pair = [k for w, k in mine if w == 1]
        assert pair.index("transfer_started") < pair.index("transfer_finished") < pair.index("first_token")
        snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
        assert snap["pd"]["num_transfers"] == 1 and snap["pd"]["stranded_reservation_blocks"] == 0
        assert await live_blocks(client) == before


async def test_each_side_is_a_replica_at_its_own_path() -> None:
    async with serving(pd_config(), create_pd_app) as (client, _):
        workers = (await client.get("/admin/workers", headers=ADMIN)).json()["workers"]
        assert [(w["worker"], w["role"], w["path"]) for w in workers] == [
            (0, "prefill", "/replicas/prefill"),
            (1, "decode", "/replicas/decode"),
        ]
        assert (await client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT))).status_code == 200
        for role in ("prefill", "decode"):
            text = (await client.get(f"/replicas/{role}/metrics")).text
            assert f'vllm:kv_cache_usage_perc{{model_name="{MODEL}"}}' in text
            assert (await client.get(f"/replicas/{role}/admin/snapshot", headers=ADMIN)).json()["num_blocks"] > 0
            side = await client.post(f"/replicas/{role}/v1/chat/completions", headers=ACME, json=chat())
            assert side.status_code == 404  # a side answers no client: the pair does
        text = (await client.get("/metrics", headers=ADMIN)).text
        assert f'vllm:kv_cache_usage_perc{{model_name="{MODEL}",role="decode"}}' in text
        assert 'kvgate_pd_transfers_total{outcome="started"} 1.0' in text


async def test_a_cancel_timed_to_the_transfer_frees_both_pools() -> None:
    async with serving(pd_config(), create_pd_app) as (client, _):
        before = await live_blocks(client)
        chaos = await client.post("/admin/pd/chaos", headers=ADMIN, json={"cancel_every": 1})
        assert chaos.json()["chaos"]["cancel_every"] == 1
        resp = await client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT, 8))
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "cancelled"
        rid = resp.headers["x-request-id"]
        failed = [e for e in await events(client) if e["request_id"] == rid and e["kind"] == "transfer_failed"]
        assert [(e["worker"], e["reason"]) for e in failed] == [(1, "cancelled")]
        snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
        assert snap["pd"]["num_chaos_cancels"] == 1 and snap["pd"]["stranded_reservation_blocks"] == 0
        assert await live_blocks(client) == before


async def test_a_failed_transfer_is_an_explicit_error_where_the_pair_does_not_fall_back() -> None:
    async with serving(pd_config(pd__on_failure="error"), create_pd_app) as (client, _):
        await client.post("/admin/pd/chaos", headers=ADMIN, json={"failure_rate": 1.0})
        resp = await client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT, 8, stream=True))
        body = resp.json()["error"]
        assert resp.status_code == 503 and body["code"] == "worker_lost" and "KV transfer" in body["message"]


async def test_the_decode_side_refuses_before_the_prefill_is_spent() -> None:
    config = pd_config(pd__decode={"tenants.acme.max_kv_share": 0.001})
    async with serving(config, create_pd_app) as (client, _):
        resp = await client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT, 8))
        assert resp.status_code == 429 and resp.json()["error"]["code"] == "tenant_quota"
        kinds = [(e["worker"], e["kind"]) for e in await events(client)]
        assert (1, "rejected") in kinds and not [k for w, k in kinds if w == 0 and k == "admitted"]


async def test_a_client_gone_mid_transfer_frees_both_pools() -> None:
    async with serving(pd_config(), create_pd_app) as (client, app):
        await client.post("/admin/pd/chaos", headers=ADMIN, json={"link_slowdown": 100_000})  # a transfer takes minutes
        before = await live_blocks(client)
        pd = app.state.kvgate.loop.pd
        sent = asyncio.ensure_future(client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT, 8)))
        [pdr] = await transferring(pd)
        sent.cancel()  # the client goes away
        with contextlib.suppress(asyncio.CancelledError):
            await sent
        assert pdr.state is PdState.FINISHED and pdr.finish_reason == "cancelled"
        assert await live_blocks(client) == before and pd.stranded_blocks() == 0


async def test_a_prefill_engine_killed_mid_transfer_leaves_the_request_to_the_decode_side() -> None:
    async with serving(pd_config(), create_pd_app) as (client, app):
        await client.post("/admin/pd/chaos", headers=ADMIN, json={"link_slowdown": 100_000})
        before = await live_blocks(client)
        pd = app.state.kvgate.loop.pd
        sent = asyncio.ensure_future(client.post("/v1/chat/completions", headers=ACME, json=chat(PROMPT, 8)))
        await transferring(pd)
        killed = await client.post("/admin/pd/chaos", headers=ADMIN, json={"kill_prefill": True})
        assert killed.json()["prefill_requests_lost"] == 1
        resp = await sent  # its source gone, it fell back to a prefill on the decode side
        assert resp.status_code == 200 and resp.json()["choices"][0]["finish_reason"] == "length"
        snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
        assert snap["pd"]["num_fallbacks"] == 1 and snap["pd"]["stranded_reservation_blocks"] == 0
        assert await live_blocks(client) == before


async def test_link_chaos_needs_the_admin_key_and_says_what_to_send() -> None:
    async with serving(pd_config(), create_pd_app) as (client, _):
        assert (await client.post("/admin/pd/chaos", json={"cancel_every": 1})).status_code == 401
        for body in ({}, {"link_slowdown": 0.5}, {"failure_rate": 2}, {"cancel_every": -1}, {"drop": 1}):
            resp = await client.post("/admin/pd/chaos", headers=ADMIN, json=body)
            assert resp.status_code == 400 and resp.json()["error"]["message"], body
