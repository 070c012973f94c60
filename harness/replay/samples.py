"""samples.csv and tenant_samples.csv rows from the engine's usage snapshot.

Replay samples at a fixed virtual interval. The engine's state changes only at step boundaries,
so the sample stamped T shows the engine at the first step boundary at or after T (before the
arrivals due at that boundary are added); while the engine is idle nothing changes and the
samples of the idle gap all show the same state. This is the same in event-driven and
step-by-step replay, so both write identical samples.
"""

from __future__ import annotations

from collections.abc import Mapping

from reference_engine.config import TrafficClass
from reference_engine.core.snapshot import UsageSnapshot


def sample_row(snap: UsageSnapshot, t_s: float) -> dict:
    waiting = snap.waiting_by_class
    return {
        "t_s": t_s, "num_blocks": snap.num_blocks, "live_blocks": snap.live_blocks,
        "retained_blocks": snap.retained_blocks, "pinned_blocks": snap.pinned_blocks,
        "cached_blocks": snap.cached_blocks, "free_blocks": snap.free_blocks, "usage": snap.usage,
        "num_running": snap.num_running, "num_waiting": snap.num_waiting, "num_swapped": snap.num_swapped,
        "waiting_system": waiting.get(TrafficClass.SYSTEM.value, 0),
        "waiting_interactive": waiting.get(TrafficClass.INTERACTIVE.value, 0),
        "waiting_batch": waiting.get(TrafficClass.BATCH.value, 0),
        "fragmentation": snap.fragmentation, "level": snap.level, "source": "engine",
    }


def tenant_rows(snap: UsageSnapshot, t_s: float, caps: Mapping[str, float]) -> list[dict]:
    """One row per configured tenant (zero blocks included), with its hard cap."""
    live = snap.tenant_live_blocks
    return [{"t_s": t_s, "tenant": name, "live_blocks": live.get(name, 0),
             "share": live.get(name, 0) / snap.num_blocks, "cap": cap} for name, cap in caps.items()]
