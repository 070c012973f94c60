"""The app's lifespan: its engine is closed when the server shuts down, so what the executor
holds outside memory (the torch disk tier's files) goes then, not at exit."""

import pytest

from reference_engine.core.engine import EngineCore
from tests.unit.server.server_support import ACME, chat, server_config, serving

pytestmark = pytest.mark.anyio


async def test_shutdown_closes_the_engine(monkeypatch):
    closed: list[EngineCore] = []
    monkeypatch.setattr(EngineCore, "close", lambda core: closed.append(core))
    async with serving(server_config()) as (client, app):
        assert (await client.post("/v1/chat/completions", json=chat(max_tokens=2), headers=ACME)).status_code == 200
        assert closed == []
    assert closed == [app.state.kvgate.core]
