"""Usage samples from /admin/snapshot: one samples.csv row and one tenant_samples.csv row per
configured tenant, the same columns replay writes (harness/replay/samples.py).

A multi-worker engine answers with the sums over its workers (one pool's view of several).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.collectors.admin import run_time


def sample_row(snap: Mapping[str, Any], started_unix: float) -> dict[str, Any]:
    waiting = snap.get("waiting_by_class", {})
    return {
        "t_s": run_time(snap["t_s"], snap, started_unix), "num_blocks": snap["num_blocks"],
        "live_blocks": snap["live_blocks"], "retained_blocks": snap["retained_blocks"],
        "pinned_blocks": snap["pinned_blocks"], "cached_blocks": snap["cached_blocks"],
        "free_blocks": snap["free_blocks"], "usage": snap["usage"], "num_running": snap["num_running"],
        "num_waiting": snap["num_waiting"], "num_swapped": snap["num_swapped"],
        "waiting_system": waiting.get("system", 0), "waiting_interactive": waiting.get("interactive", 0),
        "waiting_batch": waiting.get("batch", 0), "fragmentation": snap["fragmentation"], "level": snap["level"],
        "source": "engine",
    }


def tenant_rows(snap: Mapping[str, Any], t_s: float, caps: Mapping[str, float]) -> list[dict[str, Any]]:
    """One row per configured tenant (zero blocks included), with its hard cap."""
    live, num_blocks = snap.get("tenant_live_blocks", {}), snap["num_blocks"]
    return [{"t_s": t_s, "tenant": name, "live_blocks": live.get(name, 0), "share": live.get(name, 0) / num_blocks,
             "cap": cap} for name, cap in caps.items()]


def in_flight(snap: Mapping[str, Any]) -> int:
    """Requests the engine still holds (running, waiting, swapped), plus router reservations."""
    return (snap["num_running"] + snap["num_waiting"] + snap["num_swapped"]
            + int(snap.get("num_reservations", 0)))
