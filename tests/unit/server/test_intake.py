"""Intake of long prompts: judged on their token count before tokenizing, tokenized off the loop."""

import asyncio

import pytest

from record.events import EventKind
from reference_engine.tokenizer import chat_prompt_tokens
from tests.unit.server.server_support import ACME, chat, server_config, serving

pytestmark = pytest.mark.anyio

LONG = " ".join(f"w{i}" for i in range(4000))  # ≈ 23K characters: past LONG_PROMPT_CHARS
PROMPT_TOKENS = chat_prompt_tokens([4000])  # what the chat template makes of it


class CountingEncode:
    """A test seam around the server process's tokenizer: counts its `encode` calls."""

    def __init__(self, encode) -> None:
        self.encode = encode
        self.num_calls = 0

    def __call__(self, text: str) -> list[int]:
        self.num_calls += 1
        return self.encode(text)


async def test_a_refused_long_prompt_gets_its_429_before_any_tokenizing(monkeypatch):
    config = server_config(tenants__acme__max_active_seqs=1)
    async with serving(config) as (client, app):
        state = app.state.kvgate
        busy = state.loop.submit(
            tenant="acme", prompt_token_ids=list(range(40)), max_new_tokens=500, streaming=False
        )  # holds acme's one slot
        seam = CountingEncode(state.core.tokenizer.encode)
        monkeypatch.setattr(state.core.tokenizer, "encode", seam)
        r = await client.post("/v1/chat/completions", json=chat(LONG, max_tokens=8), headers=ACME)
        body = r.json()
        assert r.status_code == 429 and body["error"]["code"] == "tenant_quota" and int(r.headers["retry-after"]) >= 1
        assert seam.num_calls == 0 and state.tokenize_pool.num_encoded == 0  # refused on the count alone
        [rejected] = [e for e in state.core.events if e.kind is EventKind.REJECTED]
        assert rejected.request_id == r.headers["x-request-id"] and rejected.num_tokens == PROMPT_TOKENS
        state.loop.abort(busy)


async def test_an_admitted_long_prompt_is_tokenized_once_in_the_tokenizer_process(monkeypatch):
    async with serving(server_config()) as (client, app):
        state = app.state.kvgate
        seam = CountingEncode(state.core.tokenizer.encode)
        monkeypatch.setattr(state.core.tokenizer, "encode", seam)
        r = await client.post("/v1/chat/completions", json=chat(LONG, max_tokens=2), headers=ACME)
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == PROMPT_TOKENS
        assert seam.num_calls == 0 and state.tokenize_pool.num_encoded == 1


async def test_a_short_prompt_is_tokenized_inline(monkeypatch):
    async with serving(server_config()) as (client, app):
        state = app.state.kvgate
        seam = CountingEncode(state.core.tokenizer.encode)
        monkeypatch.setattr(state.core.tokenizer, "encode", seam)
        r = await client.post("/v1/chat/completions", json=chat("a short one", max_tokens=2), headers=ACME)
        assert r.status_code == 200 and seam.num_calls == 1 and state.tokenize_pool.num_encoded == 0


async def test_a_burst_of_one_tenants_long_prompts_is_refused_on_counts_after_the_first_is_in():
    """Regression: a burst once passed the count check together (nothing was reserved yet) and
    was tokenized whole, only to be refused after."""
    async with serving(server_config()) as (client, app):
        state = app.state.kvgate
        big = chat(LONG, max_tokens=200)  # ≈ 290 blocks each: acme's 15 % share holds one
        answers = await asyncio.gather(*(client.post("/v1/chat/completions", json=big, headers=ACME) for _ in range(6)))
        assert sorted(r.status_code for r in answers) == [200] + [429] * 5
        assert state.tokenize_pool.num_encoded == 1
