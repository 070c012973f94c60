"""Intake of long prompts: judged on their token count before tokenizing, tokenized off the loop."""

import threading

import pytest

from reference_engine.core.events import EventKind
from reference_engine.tokenizer import chat_prompt_tokens
from tests.unit.server.server_support import ACME, chat, server_config, serving

pytestmark = pytest.mark.anyio

LONG = " ".join(f"w{i}" for i in range(4000))  # ≈ 23K characters: past LONG_PROMPT_CHARS
PROMPT_TOKENS = chat_prompt_tokens([4000])  # what the chat template makes of it


class CountingEncode:
    """A test seam around the tokenizer: counts `encode` calls and the threads they ran on."""

    def __init__(self, encode) -> None:
        self.encode = encode
        self.threads: list[str] = []

    def __call__(self, text: str) -> list[int]:
        self.threads.append(threading.current_thread().name)
        return self.encode(text)


async def test_a_refused_long_prompt_gets_its_429_before_any_tokenizing(monkeypatch):
    config = server_config(tenants__acme__max_active_seqs=1)
    async with serving(config) as (client, app):
        state = app.state.kvgate
        busy = state.loop.submit(tenant="acme", prompt_token_ids=list(range(40)), max_new_tokens=500,
                                 streaming=False)  # holds acme's one slot
        seam = CountingEncode(state.core.tokenizer.encode)
        monkeypatch.setattr(state.core.tokenizer, "encode", seam)
        r = await client.post("/v1/chat/completions", json=chat(LONG, max_tokens=8), headers=ACME)
        body = r.json()
        assert r.status_code == 429 and body["error"]["code"] == "tenant_quota" and int(r.headers["retry-after"]) >= 1
        assert seam.threads == []  # refused on the count alone
        [rejected] = [e for e in state.core.events if e.kind is EventKind.REJECTED]
        assert rejected.request_id == r.headers["x-request-id"] and rejected.num_tokens == PROMPT_TOKENS
        state.loop.abort(busy)


async def test_an_admitted_long_prompt_is_tokenized_once_off_the_event_loop(monkeypatch):
    async with serving(server_config()) as (client, app):
        state = app.state.kvgate
        seam = CountingEncode(state.core.tokenizer.encode)
        monkeypatch.setattr(state.core.tokenizer, "encode", seam)
        r = await client.post("/v1/chat/completions", json=chat(LONG, max_tokens=2), headers=ACME)
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == PROMPT_TOKENS
        assert len(seam.threads) == 1 and seam.threads[0].startswith("kvgate-tokenize")


async def test_a_short_prompt_is_tokenized_inline(monkeypatch):
    async with serving(server_config()) as (client, app):
        state = app.state.kvgate
        seam = CountingEncode(state.core.tokenizer.encode)
        monkeypatch.setattr(state.core.tokenizer, "encode", seam)
        r = await client.post("/v1/chat/completions", json=chat("a short one", max_tokens=2), headers=ACME)
        assert r.status_code == 200 and seam.threads == [threading.current_thread().name]
