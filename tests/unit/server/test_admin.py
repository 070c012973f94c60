"""The admin API: behind the admin key, and what it says is the engine's own state."""

import os

import pytest

from record.events import EVENT_COLUMNS
from reference_engine.config import config_digest
from reference_engine.executors.base import Tier
from reference_engine.server.admin import EVENTS_COLUMNS
from tests.unit.server.server_support import ACME, ADMIN, chat, server_config, serving

pytestmark = pytest.mark.anyio

PATHS = ("/admin/ledger", "/admin/events", "/admin/snapshot", "/admin/config", "/admin/workers")


@pytest.mark.parametrize("path", PATHS)
async def test_admin_needs_the_admin_key(path):
    async with serving(server_config()) as (client, _):
        assert (await client.get(path)).status_code == 401
        assert (await client.get(path, headers=ACME)).status_code == 401
        assert (await client.get(path, headers=ADMIN)).status_code == 200


def test_event_rows_follow_the_event_columns_plus_worker():
    assert EVENTS_COLUMNS == (*EVENT_COLUMNS, "worker")


async def test_events_page_by_cursor_and_match_the_engine_log():
    async with serving(server_config()) as (client, app):
        for _ in range(2):
            await client.post("/v1/chat/completions", json=chat(max_tokens=2), headers=ACME)
        first = (await client.get("/admin/events", params={"since": 0, "limit": 3}, headers=ADMIN)).json()
        rest = (await client.get("/admin/events", params={"since": first["next_cursor"]}, headers=ADMIN)).json()
        rows = first["rows"] + rest["rows"]
        expected = [[*e.to_row().values(), None] for e in app.state.kvgate.core.events]
        assert first["columns"] == list(EVENTS_COLUMNS) and len(first["rows"]) == 3
        assert rows == expected and rest["missed"] == 0 and rest["next_cursor"] == len(expected)
        assert first["engine_clock_offset_unix"] == app.state.kvgate.loop.engine_clock_offset_unix
        assert (await client.get("/admin/events", params={"since": -1}, headers=ADMIN)).status_code == 400


async def test_snapshot_ledger_config_and_workers_describe_this_engine():
    config = server_config()
    async with serving(config) as (client, app):
        await client.post("/v1/chat/completions", json=chat(max_tokens=2), headers={**ACME, "X-Session-Id": "s1"})
        core = app.state.kvgate.core
        snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
        assert snap["live_blocks"] == core.pool.num_live and snap["num_blocks"] == core.pool.num_blocks
        assert snap["num_running"] == 0 and snap["usage"] == pytest.approx(core.pool.num_live / core.pool.num_blocks)
        ledger = (await client.get("/admin/ledger", headers=ADMIN)).json()
        assert ledger["config_digest"] == core.digest and [s["session_id"] for s in ledger["sessions"]] == ["s1"]
        cfg = (await client.get("/admin/config", headers=ADMIN)).json()
        assert cfg["digest"] == config_digest(config) and cfg["config"]["engine"]["max_num_seqs"] == 32
        [worker] = (await client.get("/admin/workers", headers=ADMIN)).json()["workers"]
        assert worker["pid"] == os.getpid() and worker["state"] == "ready"


async def test_the_snapshot_carries_the_kv_tiers_when_the_engine_has_them():
    async with serving(server_config()) as (client, _):
        assert "tiers" not in (await client.get("/admin/snapshot", headers=ADMIN)).json()
    async with serving(server_config(tiers__host_gib=1.0)) as (client, app):
        await client.post("/v1/chat/completions", json=chat(max_tokens=2), headers=ACME)
        snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
        assert snap["tiers"] == app.state.kvgate.core.tiers.stats() and snap["tier_loads_in_flight"] == 0
        assert snap["tiers"]["host"]["leaked_blocks"] == 0 and snap["tiers"]["host"]["capacity_blocks"] > 0


CHAOS = "/admin/tiers/chaos"


async def test_tier_chaos_needs_the_admin_key_before_it_reads_the_body():
    async with serving(server_config(tiers__host_gib=1.0, tiers__disk_gib=1.0)) as (client, app):
        for headers in ({}, ACME):
            detach = await client.post(CHAOS, json={"tier": "disk", "attached": False}, headers=headers)
            assert detach.status_code == 401
            assert (await client.post(CHAOS, content=b"not json", headers=headers)).status_code == 401
        assert app.state.kvgate.core.tiers.chaos_state()["attached"] == {"host": True, "disk": True}


async def test_tier_chaos_detaches_slows_and_fails_through_the_engine_tiers():
    async with serving(server_config(tiers__host_gib=1.0, tiers__disk_gib=1.0)) as (client, app):
        tiers = app.state.kvgate.core.tiers
        detached = (await client.post(CHAOS, json={"tier": "disk", "attached": False}, headers=ADMIN)).json()
        assert detached["chaos"]["attached"] == {"host": True, "disk": False} and "tiers" in detached
        assert not tiers.stores[Tier.DISK].attached
        await client.post(CHAOS, json={"tier": "disk", "attached": True}, headers=ADMIN)
        await client.post(CHAOS, json={"tier": "host", "read_slowdown": 10}, headers=ADMIN)
        state = (await client.post(CHAOS, json={"load_failure_rate": 0.25}, headers=ADMIN)).json()["chaos"]
        assert state == {
            "attached": {"host": True, "disk": True},
            "read_slowdown": {"host": 10.0, "disk": 1.0},
            "load_failure_rate": 0.25,
        }
        assert tiers.config.load_failure_rate == 0.25 and tiers.stores[Tier.DISK].attached


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "exactly one change"),
        ({"tier": "disk", "attached": False, "read_slowdown": 2}, "exactly one change"),
        ({"attached": False}, "needs the tier"),
        ({"tier": "disk", "load_failure_rate": 0.5}, "without a tier"),
        ({"tier": "gpu", "attached": False}, "tier"),
        ({"tier": "disk", "read_slowdown": 0.5}, "at least 1"),
        ({"load_failure_rate": 2}, "in [0, 1]"),
        ({"tier": "disk", "detach": True}, "detach"),
    ],
)
async def test_tier_chaos_answers_bad_input_with_a_400_that_says_what_to_fix(body, says):
    async with serving(server_config(tiers__host_gib=1.0, tiers__disk_gib=1.0)) as (client, _):
        resp = await client.post(CHAOS, json=body, headers=ADMIN)
        assert resp.status_code == 400
        error = resp.json()["error"]
        assert error["code"] == "invalid_request" and says in error["message"]


async def test_tier_chaos_on_a_tier_or_engine_that_is_not_there_says_how_to_get_one():
    async with serving(server_config(tiers__host_gib=1.0)) as (client, _):
        resp = await client.post(CHAOS, json={"tier": "disk", "attached": False}, headers=ADMIN)
        assert resp.status_code == 400 and "disk_gib" in resp.json()["error"]["message"]
    async with serving(server_config()) as (client, _):
        resp = await client.post(CHAOS, json={"load_failure_rate": 0.5}, headers=ADMIN)
        assert resp.status_code == 400 and "[tiers]" in resp.json()["error"]["message"]


OFFLOAD = "/admin/tiers/offload"


async def test_tier_offload_needs_the_admin_key_and_moves_cached_blocks_down():
    async with serving(server_config(tiers__host_gib=1.0, tiers__disk_gib=1.0)) as (client, app):
        core = app.state.kvgate.core
        await client.post("/v1/chat/completions", json=chat(" ".join(["word"] * 100), max_tokens=2), headers=ACME)
        cached = core.pool.num_cached
        assert cached > 0
        for headers in ({}, ACME):
            assert (await client.post(OFFLOAD, json={"tier": "host"}, headers=headers)).status_code == 401
        assert core.pool.num_cached == cached
        moved = (await client.post(OFFLOAD, json={"tier": "disk"}, headers=ADMIN)).json()
        assert moved["gpu_blocks_offloaded"] == cached and moved["host_blocks_offloaded"] == cached
        assert moved["tiers"]["disk"]["used_blocks"] == cached and core.pool.num_cached == 0


async def test_tier_offload_answers_bad_input_and_a_missing_tier_with_a_400():
    async with serving(server_config(tiers__host_gib=1.0)) as (client, _):
        for body, says in (({"tier": "gpu"}, "tier"), ({}, "tier"), ({"tier": "disk"}, "disk_gib")):
            resp = await client.post(OFFLOAD, json=body, headers=ADMIN)
            assert resp.status_code == 400 and says in resp.json()["error"]["message"]
    async with serving(server_config()) as (client, _):
        resp = await client.post(OFFLOAD, json={"tier": "host"}, headers=ADMIN)
        assert resp.status_code == 400 and "[tiers]" in resp.json()["error"]["message"]
