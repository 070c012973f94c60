"""Attacks on the prefix cache from a hostile tenant, as they were run against the engine when its
block hash was Python's tuple hash (invertible) and /v1/completions took token ids of any size.

The attacker knows how block hashes used to be made (`hash((parent, scope, tuple(tokens)))`, the
scopes from public names) and inverts CPython's tuple hash to craft token ids whose block hashes
equal those of another tenant's prompt. With them it probed whether acme had a prompt cached
(32 cached tokens against 0) and planted a block that acme's next request then reused. Each test
here replays one attack and asserts it learns or plants nothing.
"""

from __future__ import annotations

import hashlib

import pytest

from tests.unit.server.server_support import MODEL, server_config, serving

pytestmark = pytest.mark.anyio

ACME, GLOBEX = {"Authorization": "Bearer sk-acme"}, {"Authorization": "Bearer sk-globex"}
MASK, M61 = (1 << 64) - 1, (1 << 61) - 1
P1, P2, P5 = 11400714785074694791, 14029467366897019727, 2870177450012600261  # CPython's tuple hash primes
MODEL_SCOPE = "llama-3.1-8b|kvgate-words-v1||kvgate-chat-v1"  # what the test config's model names
PROMPT = list(range(100, 133))  # 33 ids: two full 16-token blocks can hit


def _stable_id(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


OLD_ROOT = _stable_id(f"model:{MODEL_SCOPE}")


def old_scope(tenant: str) -> int:
    return _stable_id(f"tenant:{tenant}:v0:{OLD_ROOT}")


def _acc(lanes: list[int]) -> int:
    acc = P5
    for lane in lanes:
        acc = (acc + (lane & MASK) * P2) & MASK
        acc = ((acc << 31) | (acc >> 33)) & MASK
        acc = (acc * P1) & MASK
    return acc


def _last_lane(lanes: list[int], length: int, target: int) -> int:
    """The hash the last item of a `length`-tuple must have for the tuple to hash to `target`."""
    acc = (target - (length ^ (P5 ^ 3527539))) & MASK
    acc = (acc * pow(P1, -1, 1 << 64)) & MASK
    acc = ((acc >> 31) | (acc << 33)) & MASK
    return ((acc - _acc(lanes)) * pow(P2, -1, 1 << 64)) & MASK


def _block_colliding(parent: int, scope: int, target: int) -> list[int]:
    """16 token ids that make `hash((parent, scope, tuple(ids))) == target`."""
    inner = _last_lane([hash(parent), hash(scope)], 3, target & MASK)
    for attempt in range(1000):
        free = [attempt * 16 + i for i in range(15)]
        last = _last_lane(free, 16, inner)
        if last < M61:  # an int below 2^61 - 1 hashes to itself
            ids = [*free, last]
            assert hash((parent, scope, tuple(ids))) == target
            return ids
    raise AssertionError("no colliding block found")


def crafted(victim_prompt: list[int], victim: str, attacker: str) -> list[int]:
    """The attacker's prompt whose first two blocks hash (under the old scheme) as the victim's."""
    parent, ids = OLD_ROOT, []
    for lo in (0, 16):
        target = hash((parent, old_scope(victim), tuple(victim_prompt[lo : lo + 16])))
        ids += _block_colliding(parent, old_scope(attacker), target)
        parent = target
    return [*ids, victim_prompt[-1]]


async def complete(client, headers: dict, prompt: list[int]) -> tuple[int, int]:
    """(HTTP status, prefix-cache hit tokens) of one non-streamed completion."""
    r = await client.post("/v1/completions", headers=headers, json={"model": MODEL, "prompt": prompt, "max_tokens": 1})
    cached = r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] if r.status_code == 200 else 0
    return r.status_code, cached


async def test_another_tenant_cannot_probe_whether_a_prompt_is_cached() -> None:
    async with serving(server_config()) as (client, _):
        assert await complete(client, ACME, PROMPT) == (200, 0)
        status, cached = await complete(client, GLOBEX, crafted(PROMPT, "acme", "globex"))
        assert cached == 0 and status == 400  # old engine: 200 with 32 cached tokens, acme's


async def test_another_tenant_cannot_plant_a_block_the_victim_reuses() -> None:
    async with serving(server_config()) as (client, _):
        await complete(client, GLOBEX, crafted(PROMPT, "acme", "globex"))
        assert await complete(client, ACME, PROMPT) == (200, 0)  # old engine: 16 tokens from globex's block


async def test_ids_that_used_to_collide_within_a_tenant_are_refused() -> None:
    async with serving(server_config()) as (client, _):
        assert await complete(client, ACME, PROMPT) == (200, 0)
        for shift in (M61, 1 << 64, 10**100):  # equal under the tuple hash, and under the old sha256's mask
            assert await complete(client, ACME, [t + shift for t in PROMPT]) == (400, 0)


async def test_a_cache_salt_shares_only_with_the_same_tenant_and_salt() -> None:
    async with serving(server_config()) as (client, _):

        async def cached(headers: dict, **salt: str) -> int:
            r = await client.post(
                "/v1/completions", headers=headers, json={"model": MODEL, "prompt": PROMPT, "max_tokens": 1, **salt}
            )
            return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]

        assert await cached(ACME, cache_salt="alice") == 0
        assert await cached(ACME, cache_salt="alice") == 32
        assert [await cached(ACME, cache_salt="bob"), await cached(ACME), await cached(GLOBEX, cache_salt="alice")] == [
            0,
            0,
            0,
        ]
