from __future__ import annotations

from dataclasses import asdict

from harness.collectors.snapshot import in_flight, sample_row, tenant_rows
from harness.replay import samples as replay_samples
from record.run_record import SAMPLE_COLUMNS, TENANT_SAMPLE_COLUMNS
from reference_engine import EngineCore
from tests.helpers import small_config


def admin_snapshot(core: EngineCore) -> dict:
    """What GET /admin/snapshot answers (reference_engine/server/admin.py)."""
    snap = core.snapshot()
    return {
        **asdict(snap),
        "usage": snap.usage,
        "active_blocks": snap.active_blocks,
        "num_open_streams": 0,
        "engine_clock_offset_unix": 1000.0,
        "worker": None,
    }


def test_a_snapshot_becomes_a_sample_row_on_the_run_clock() -> None:
    core = EngineCore(small_config(num_blocks=1024))
    core.pin_prefixes()
    snap = admin_snapshot(core)
    row = sample_row(snap, started_unix=990.0)
    assert set(row) <= set(SAMPLE_COLUMNS) and row["source"] == "engine"
    assert row["t_s"] == snap["t_s"] + 10.0 and row["num_blocks"] == 1024
    assert row["waiting_interactive"] == 0 and row["level"] == "normal"


def test_every_configured_tenant_gets_a_row_with_its_cap() -> None:
    snap = {"num_blocks": 200, "tenant_live_blocks": {"acme": 30}}
    rows = tenant_rows(snap, 1.5, {"acme": 0.15, "globex": 0.2})
    assert rows == [
        {"t_s": 1.5, "tenant": "acme", "live_blocks": 30, "share": 0.15, "cap": 0.15, "source": "engine"},
        {"t_s": 1.5, "tenant": "globex", "live_blocks": 0, "share": 0.0, "cap": 0.2, "source": "engine"},
    ]
    assert all(tuple(r) == TENANT_SAMPLE_COLUMNS for r in rows)


def test_in_flight_counts_router_reservations_too() -> None:
    snap = {"num_running": 1, "num_waiting": 2, "num_swapped": 0}
    assert in_flight(snap) == 3 and in_flight({**snap, "num_reservations": 4}) == 7


def test_live_and_replay_write_the_same_rows_of_one_snapshot() -> None:
    core = EngineCore(small_config(num_blocks=1024))
    core.pin_prefixes()
    caps = {t.name: t.config.max_kv_share for t in core.tenants}
    snap = core.snapshot()
    live = {**asdict(snap), "usage": snap.usage, "engine_clock_offset_unix": 1000.0}
    row = sample_row(live, started_unix=990.0)
    assert replay_samples.sample_row(snap, snap.t_s + 10.0) == row and set(row) <= set(SAMPLE_COLUMNS)
    assert replay_samples.tenant_rows(snap, 1.5, caps) == tenant_rows(live, 1.5, caps) and len(caps) > 0


def test_samples_carry_each_kv_tier_usage_and_leave_absent_tiers_empty() -> None:
    core = EngineCore(small_config(num_blocks=1024, overrides={"tiers.host_gib": 1.0}))
    core.tiers.demote([11, 12], ["acme", "acme"], [0, 1], now_s=0.0)
    snap = core.snapshot()
    row = replay_samples.sample_row(snap, 1.0)
    assert (row["host_tier_blocks"], row["disk_tier_blocks"]) == (2, None)
    assert sample_row({**admin_snapshot(core), "t_s": 0.0}, started_unix=1000.0) == {**row, "t_s": 0.0}
    no_tiers = replay_samples.sample_row(EngineCore(small_config(num_blocks=1024)).snapshot(), 1.0)
    assert no_tiers["host_tier_blocks"] is None and no_tiers["disk_tier_blocks"] is None
