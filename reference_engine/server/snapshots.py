"""/admin/snapshot's body: one engine's usage now, or several engines' summed into one pool's view
(the router's workers, a P/D pair's two sides)."""

from __future__ import annotations

from dataclasses import asdict

from reference_engine.core.engine import EngineCore
from reference_engine.core.watermarks import PressureLevel

_SUMMED = (
    "num_blocks",
    "live_blocks",
    "retained_blocks",
    "pinned_blocks",
    "cached_blocks",
    "free_blocks",
    "pending_blocks",
    "num_running",
    "num_waiting",
    "num_swapped",
    "num_prefilling",
    "public_live_blocks",
    "host_used_bytes",
    "active_blocks",
    "num_open_streams",
)


def engine_snapshot(core: EngineCore, num_open_streams: int) -> dict:
    """One engine's snapshot, as the harness's sampler reads it."""
    snap = core.snapshot()
    return {
        **asdict(snap),
        "usage": snap.usage,
        "active_blocks": snap.active_blocks,
        "num_open_streams": num_open_streams,
        **core.tier_state(),
    }


def aggregate_snapshots(snapshots: dict[int, dict]) -> dict:
    """One pool's view of several: sums of blocks and queues, the worst level and oldest wait."""
    out: dict = {key: sum(s[key] for s in snapshots.values()) for key in _SUMMED}
    for key in ("waiting_by_class", "tenant_live_blocks", "tier_used_blocks"):
        merged: dict[str, float] = {}
        for s in snapshots.values():
            for k, v in s[key].items():
                merged[k] = merged.get(k, 0) + v
        out[key] = merged
    oldest: dict[str, float] = {}
    for s in snapshots.values():
        for k, v in s["oldest_wait_s_by_class"].items():
            oldest[k] = max(oldest.get(k, 0.0), v)
    out["oldest_wait_s_by_class"] = oldest
    live = out["live_blocks"]
    out["fragmentation"] = (
        sum(s["fragmentation"] * s["live_blocks"] for s in snapshots.values()) / live if live else 0.0
    )
    levels = [PressureLevel[s["level"].upper()] for s in snapshots.values()]
    out["level"] = max(levels, default=PressureLevel.NORMAL).name.lower()
    out["usage"] = live / out["num_blocks"] if out["num_blocks"] else 0.0
    return out
