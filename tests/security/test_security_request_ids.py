"""A tenant that occupies request ids to fail other tenants' requests.

The attack as it was run: the client's `X-Request-Id` became the engine's request id, server ids
were sequential and the "already in flight" check spanned all tenants. So globex read the id of
its own answer, predicted the next ten server ids, and held ten long requests in flight under
them: ten of fifteen requests of the other tenants then failed with 400 "already in flight".
"""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.server.server_support import MODEL, server_config, serving

pytestmark = pytest.mark.anyio

ATTACKER = {"Authorization": "Bearer sk-globex"}
VICTIMS = ("sk-acme", "sk-batch", "sk-ops")


def body(max_tokens: int, **extra: object) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens, **extra}


async def test_a_tenant_cannot_occupy_the_ids_of_other_tenants_requests() -> None:
    async with serving(server_config()) as (client, app):
        seen = (await client.post("/v1/chat/completions", json=body(1), headers=ATTACKER)).json()["id"]
        prefix, _, counter = seen.rpartition("-")
        upcoming = [f"{prefix}-{int(counter, 16) + i:x}" for i in range(1, 11)]
        held = [
            asyncio.create_task(
                client.post(
                    "/v1/chat/completions", json=body(400, stream=True), headers={**ATTACKER, "X-Request-Id": rid}
                )
            )
            for rid in upcoming
        ]  # ten 400-token streams: within globex's KV cap, in flight for 400 steps
        while app.state.kvgate.loop.num_open_streams < len(held):  # all ten in flight before the victims send
            assert not any(task.done() for task in held), [task.result().text for task in held if task.done()]
            await asyncio.sleep(0.01)
        answers = await asyncio.gather(
            *(
                client.post("/v1/chat/completions", json=body(2), headers={"Authorization": f"Bearer {key}"})
                for key in VICTIMS
                for _ in range(5)
            )
        )
        for task in held:
            task.cancel()
        assert [a.status_code for a in answers] == [200] * 15  # old engine: 10 of them 400 "already in flight"
        assert not {a.json()["id"] for a in answers} & set(upcoming)
