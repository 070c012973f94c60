"""The `openai` client, sync and async, streaming and not, against `kvgate serve` on a real port."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.integration.server_process import ADMIN, SYSTEM_PROMPT, running_server, wait_until_drained

MODEL = "kvgate-tiny"
MESSAGES = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "what is a kv cache"}]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    with running_server(tmp_path_factory.mktemp("serve")) as url:
        yield url


def client(base: str, key: str = "sk-acme") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)


def test_sync_chat_whole_and_streamed(base):
    c = client(base)
    whole = c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)
    assert whole.choices[0].finish_reason == "length" and len(whole.choices[0].message.content.split()) == 5
    # the system prompt is a pinned public prefix: its two full blocks are hits from the start
    assert whole.usage.prompt_tokens == 41 and whole.usage.prompt_tokens_details.cached_tokens == 32
    chunks = list(
        c.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=5, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({ch.id for ch in chunks}) == 1
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert len(text.split()) == 5 and chunks[-1].usage.completion_tokens == 5


def test_sync_text_completion_and_models(base):
    c = client(base)
    assert len(c.completions.create(model=MODEL, prompt="one two", max_tokens=3).choices[0].text.split()) == 3
    streamed = list(c.completions.create(model=MODEL, prompt="one two", max_tokens=3, stream=True))
    assert streamed[-1].choices[0].finish_reason == "length"
    assert [m.id for m in c.models.list()] == [MODEL]


def test_async_client_whole_and_streamed(base):
    async def run() -> tuple[str, str]:
        c = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-globex", max_retries=0)
        whole = await c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
        parts = [
            ch.choices[0].delta.content or ""
            async for ch in await c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4, stream=True)
        ]
        return whole.choices[0].message.content, "".join(parts)

    whole, streamed = asyncio.run(run())
    assert len(whole.split()) == len(streamed.split()) == 4


def test_errors_arrive_as_typed_openai_exceptions(base):
    with pytest.raises(openai.AuthenticationError):
        client(base, "sk-wrong").chat.completions.create(model=MODEL, messages=MESSAGES)
    with pytest.raises(openai.NotFoundError) as not_found:
        client(base).chat.completions.create(model="gpt-9", messages=MESSAGES)
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as too_long:
        client(base).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=100_000)
    assert too_long.value.code == "context_length_exceeded"
    with pytest.raises(openai.RateLimitError) as quota:
        client(base, "sk-tiny").chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=50)
    assert quota.value.code == "tenant_quota" and quota.value.response.headers["retry-after"]


def test_two_hundred_concurrent_streams(base):
    async def one(c: openai.AsyncOpenAI, i: int) -> tuple[str, int]:
        stream = await c.chat.completions.create(
            model=MODEL, max_tokens=16, stream=True, messages=[{"role": "user", "content": f"question {i}"}]
        )
        ids, text = set(), ""
        async for ch in stream:
            ids.add(ch.id)
            text += ch.choices[0].delta.content or "" if ch.choices else ""
        assert len(ids) == 1
        return ids.pop(), len(text.split())  # under load a chunk may carry several tokens

    async def run() -> list[tuple[str, int]]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=250)
        async with httpx.AsyncClient(limits=limits, timeout=60) as http:
            c = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-acme", max_retries=0, http_client=http)
            return await asyncio.gather(*(one(c, i) for i in range(200)))

    results = asyncio.run(run())
    assert len({rid for rid, _ in results}) == 200 and {n for _, n in results} == {16}
    snap = wait_until_drained(base)
    assert snap["active_blocks"] == 0
    events = httpx.get(f"{base}/admin/events", headers=ADMIN).json()
    rows = [dict(zip(events["columns"], row)) for row in events["rows"]]
    finished = {e["request_id"] for e in rows if e["kind"] == "finished" and e["reason"] == "length"}
    assert {rid for rid, _ in results} <= finished
