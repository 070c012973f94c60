"""The tier probes: how a prompt is pushed below the GPU (the engine's offload hook, a reset),
and the probes sent around each push, against stub targets."""

from __future__ import annotations

import json

import httpx

from harness.collectors.tier_probe import BELOW_GPU, offload_routes, probe_tiers
from tests.stub_http import stub_server

CHAT = "/v1/chat/completions"


def engine(tiers: dict | None, *, hit: int = 0):
    """A reference-engine-like stub: its snapshot reports `tiers` (None: no admin API); every
    chat answer after the first of three reports `hit` cached tokens for the same party's repeat."""
    chats: list[int] = []

    def answer(method: str, path: str) -> tuple[int, bytes]:
        if path == "/admin/snapshot" and tiers is not None:
            return 200, json.dumps({"tiers": tiers}).encode()
        if path == "/admin/tiers/offload" and tiers is not None:
            return 200, b"{}"
        if path == CHAT:
            chats.append(1)
            cached = 512 if len(chats) % 3 == 2 else hit if len(chats) % 3 == 0 else 0
            usage = {"prompt_tokens_details": {"cached_tokens": cached}}
            return 200, json.dumps({"choices": [{"message": {"content": "x"}}], "usage": usage}).encode()
        return 404, b"{}"

    return answer


def test_the_engines_offload_hook_gives_a_route_per_tier_and_a_probe_pair_each() -> None:
    seen: list[tuple[str, str, dict[str, str]]] = []
    with stub_server(engine({"disk": {}, "host": {}}), seen) as url, httpx.Client() as a, httpx.Client() as b:
        routes, why = offload_routes(a, url, "admin-key")
        probes = probe_tiers([a, b], url, "m", routes)
    assert [r.tier for r in routes] == ["host", "disk"] and not why
    assert list(probes) == ["cache_salt_host", "cross_tenant_host", "cache_salt_disk", "cross_tenant_disk"]
    assert all(p.isolated for p in probes.values())
    sent = [path for _, path, _ in seen if path != "/admin/snapshot"]
    assert sent[:5] == [CHAT, "/admin/tiers/offload", CHAT, "/admin/tiers/offload", CHAT]  # pushed before each repeat


def test_a_tier_that_serves_another_party_is_a_hit_and_one_that_kept_nothing_is_not_measurable() -> None:
    with stub_server(engine({"host": {}}, hit=512)) as url, httpx.Client() as a, httpx.Client() as b:
        leaked = probe_tiers([a, b], url, "m", offload_routes(a, url, "k")[0])
    assert leaked["cross_tenant_host"].other_hit_tokens == 512 and leaked["cross_tenant_host"].isolated is False

    def forgets(method: str, path: str) -> tuple[int, bytes]:
        if path == "/reset_prefix_cache":
            return 200, b'{"success": true}'
        usage = {"prompt_tokens_details": {"cached_tokens": 0}}
        return 200, json.dumps({"choices": [{"message": {"content": "x"}}], "usage": usage}).encode()

    with stub_server(forgets) as url, httpx.Client() as a:
        routes, _ = offload_routes(a, url)
        [probe] = probe_tiers([a], url, "m", routes).values()
    assert [r.tier for r in routes] == [BELOW_GPU]
    assert not probe.measurable and "no tier below the GPU kept the prefix" in probe.detail


def test_no_tier_and_no_way_down_are_said() -> None:
    with stub_server(engine({})) as url, httpx.Client() as client:
        routes, why = offload_routes(client, url, "k")
    assert routes == [] and "host_gib" in why
    with stub_server(engine(None)) as url, httpx.Client() as client:
        routes, why = offload_routes(client, url, "k")
    assert routes == [] and "no way to push a prompt out of the GPU" in why
