"""Helpers for the server's unit tests: a small engine config and an app driven in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from reference_engine import EngineConfig
from reference_engine.server import create_app
from tests.helpers import small_config

ADMIN = {"Authorization": "Bearer sk-kvgate-admin"}
ACME = {"Authorization": "Bearer sk-acme"}
MODEL = "llama-3.1-8b"


def server_config(num_blocks: int = 2048, **overrides: Any) -> EngineConfig:
    """An engine that runs 32 sequences at once; `a__b=v` overrides config key `a.b`."""
    return small_config(num_blocks, {"engine.max_num_seqs": 32, "server.admin_key": "sk-kvgate-admin"}, **overrides)


def chat(content: str = "hello there", max_tokens: int = 4, **extra: Any) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, **extra}


@asynccontextmanager
async def serving(
    config: EngineConfig, make_app: Callable[[EngineConfig], FastAPI] = create_app
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """(client, app) with the app's lifespan (its engine loop) running; responses arrive whole.
    `make_app`: a P/D pair's app (pd_app.create_pd_app) instead of one engine's."""
    app = make_app(config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://kvgate") as client:
            yield client, app
