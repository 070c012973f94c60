"""The OpenAI routes in-process: shapes, ids, sessions, priority, clamping (one engine, real loop)."""

import asyncio
import json

import pytest

from record.events import EventKind
from tests.unit.server.server_support import ACME, ADMIN, MODEL, chat, server_config, serving

pytestmark = pytest.mark.anyio


def sse_payloads(text: str) -> list[str]:
    return [part[len("data: ") :] for part in text.split("\n\n") if part]


def engine_events(app, kind: EventKind) -> list:
    return [e for e in app.state.kvgate.core.events if e.kind is kind]


async def test_chat_completion_id_is_the_engine_request_id():
    async with serving(server_config()) as (client, app):
        r = await client.post("/v1/chat/completions", json=chat(max_tokens=3), headers=ACME)
        body = r.json()
        assert r.status_code == 200 and body["object"] == "chat.completion"
        assert r.headers["x-request-id"] == body["id"] == body["kvgate"]["request_id"]
        [finished] = engine_events(app, EventKind.FINISHED)
        assert finished.request_id == body["id"] and finished.num_tokens == 3
        core = app.state.kvgate.core
        assert body["choices"][0]["message"]["content"] == core.tokenizer.decode(
            core.tokenizer.encode(body["choices"][0]["message"]["content"])
        )
        assert body["usage"]["completion_tokens"] == 3 and body["choices"][0]["finish_reason"] == "length"


async def test_stream_is_role_chunk_then_deltas_then_finish_then_usage_then_done():
    async with serving(server_config()) as (client, app):
        r = await client.post(
            "/v1/chat/completions",
            headers=ACME,
            json=chat(max_tokens=4, stream=True, stream_options={"include_usage": True}),
        )
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        *chunks, done = sse_payloads(r.text)
        chunks = [json.loads(c) for c in chunks]
        assert done == "[DONE]"
        assert {c["id"] for c in chunks} == {r.headers["x-request-id"]}
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        deltas = [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
        assert len(deltas) == 4 and all(len(d.split()) == 1 for d in deltas)  # one SSE chunk per token
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 4
        [finished] = engine_events(app, EventKind.FINISHED)
        assert finished.request_id == chunks[0]["id"]


async def test_text_completion_streams_and_not():
    async with serving(server_config()) as (client, _):
        whole = await client.post(
            "/v1/completions", json={"model": MODEL, "prompt": "a b c", "max_tokens": 2}, headers=ACME
        )
        assert whole.json()["object"] == "text_completion" and len(whole.json()["choices"][0]["text"].split()) == 2
        streamed = await client.post(
            "/v1/completions", headers=ACME, json={"model": MODEL, "prompt": [1, 2, 3], "max_tokens": 2, "stream": True}
        )
        *chunks, done = sse_payloads(streamed.text)
        assert done == "[DONE]" and json.loads(chunks[-1])["choices"][0]["finish_reason"] == "length"
        assert [len(json.loads(c)["choices"][0]["text"].split()) for c in chunks[:-1]] == [1, 1]


async def test_every_streamed_token_is_its_own_chunk_under_many_streams():
    """Regression: under load, tokens of several steps were once grouped into one chunk."""
    async with serving(server_config()) as (client, _):

        async def one() -> list[dict]:
            r = await client.post("/v1/chat/completions", headers=ACME, json=chat(max_tokens=24, stream=True))
            return [json.loads(c) for c in sse_payloads(r.text)[1:-1]]

        streams = await asyncio.gather(*(one() for _ in range(24)))
        for chunks in streams:
            contents = [c["choices"][0]["delta"].get("content") for c in chunks[:-1]]
            assert len(contents) == 24 and all(len(t.split()) == 1 for t in contents)


async def test_a_second_turn_that_sends_the_answer_back_hits_the_sessions_prefix():
    async with serving(server_config()) as (client, _):
        question = " ".join(f"w{i}" for i in range(60))
        headers = {**ACME, "X-Session-Id": "conv-1"}
        first = (await client.post("/v1/chat/completions", json=chat(question, max_tokens=20), headers=headers)).json()
        answer = first["choices"][0]["message"]["content"]
        messages = [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "and then?"},
        ]
        second = (
            await client.post(
                "/v1/chat/completions", headers=headers, json={"model": MODEL, "messages": messages, "max_tokens": 2}
            )
        ).json()
        # turn 1 held 62 prompt + 20 output tokens: its 5 full blocks are reused by turn 2
        assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 5 * 16


async def test_a_priority_header_changes_nothing():
    async with serving(server_config()) as (client, app):
        headers = {"Authorization": "Bearer sk-batch", "X-Priority": "high", "Priority": "u=0"}
        assert (await client.post("/v1/chat/completions", json=chat(), headers=headers)).status_code == 200
        [admitted] = engine_events(app, EventKind.ADMITTED)
        assert (admitted.tenant, admitted.traffic_class) == ("batchco", "batch")


async def test_an_evicted_session_is_rebuilt_and_says_so_or_answers_410():
    async with serving(server_config()) as (client, app):
        headers = {**ACME, "X-Session-Id": "s"}
        await client.post("/v1/chat/completions", json=chat(" ".join(["x"] * 40), max_tokens=8), headers=headers)
        core = app.state.kvgate.core
        assert core.scheduler.evict_sessions(10_000, core.clock.now(), "test") > 0
        refused = await client.post(
            "/v1/chat/completions", json=chat(), headers={**headers, "X-Session-Rebuildable": "false"}
        )
        assert refused.status_code == 410 and refused.json()["error"]["code"] == "context_expired"
        rebuilt = await client.post("/v1/chat/completions", json=chat(), headers=headers)
        assert rebuilt.status_code == 200 and rebuilt.headers["x-kvgate-session-rebuilt"] == "true"
        assert rebuilt.json()["kvgate"]["session_rebuilt"] is True


async def test_the_warn_watermark_clamps_max_tokens_visibly():
    pinned = {"name": "long", "text": " ".join(f"p{i}" for i in range(400)), "pinned": True}
    config = server_config(
        kv_cache__guard__warn_at_percent=1,
        kv_cache__guard__warn_max_new_tokens=6,
        prefix_cache__public_prefixes=[pinned],
    )
    async with serving(config) as (client, _):
        r = await client.post("/v1/chat/completions", json=chat(max_tokens=20), headers=ACME)
        assert r.status_code == 200 and r.headers["x-kvgate-max-tokens-clamped"] == "6"
        assert r.json()["kvgate"]["max_tokens_clamped"] is True and r.json()["usage"]["completion_tokens"] == 6


async def test_a_client_request_id_is_a_label_beside_the_engines_own_id():
    async with serving(server_config()) as (client, app):
        r = await client.post("/v1/chat/completions", json=chat(), headers={**ACME, "X-Request-Id": "mine-1"})
        assert r.json()["id"] != "mine-1" and r.headers["x-client-request-id"] == "mine-1"
        [admitted] = engine_events(app, EventKind.ADMITTED)
        assert (admitted.request_id, admitted.client_request_id) == (r.json()["id"], "mine-1")
        bad = await client.post("/v1/chat/completions", json=chat(), headers={**ACME, "X-Request-Id": "no spaces"})
        assert bad.status_code == 400


async def test_only_the_router_with_the_admin_key_names_an_engine_request():
    async with serving(server_config()) as (client, _):
        forged = await client.post(
            "/v1/chat/completions", json=chat(), headers={**ACME, "X-Kvgate-Request-Id": "taken-1"}
        )
        assert forged.status_code == 401 and forged.json()["error"]["code"] == "invalid_api_key"
        routed = await client.post(
            "/v1/chat/completions",
            json=chat(),
            headers={**ACME, "X-Kvgate-Request-Id": "r-1", "X-Kvgate-Router-Key": ADMIN["Authorization"].split()[1]},
        )
        assert routed.json()["id"] == "r-1"


async def test_models_lists_the_served_model_for_a_tenant_key_only():
    async with serving(server_config()) as (client, _):
        assert (await client.get("/v1/models", headers=ACME)).json()["data"][0]["id"] == MODEL
        assert (await client.get("/v1/models", headers=ADMIN)).status_code == 401
