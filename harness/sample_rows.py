"""samples.csv and tenant_samples.csv rows, and the pool state of meta.initial and meta.final,
from an engine usage snapshot, live or replayed.

One definition of the columns for both sources: the admin API's JSON answer (a mapping, live
runs: harness/collectors/snapshot.py) and the engine's `UsageSnapshot` itself (replay:
harness/replay/samples.py, through `Fields`, a view that reads its attributes by name without
copying the snapshot, since replay samples every 0.5 virtual seconds).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from record.run_record import ENGINE_SOURCE


class Fields(Mapping[str, Any]):
    """A read-only mapping view of an object's attributes (a dataclass, properties included)."""

    __slots__ = ("_obj",)

    def __init__(self, obj: object) -> None:
        self._obj = obj

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(self._obj, name)
        except AttributeError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(getattr(self._obj, "__dataclass_fields__", ()))

    def __len__(self) -> int:
        return len(getattr(self._obj, "__dataclass_fields__", ()))


def sample_row(snap: Mapping[str, Any], t_s: float) -> dict[str, Any]:
    """One samples.csv row, stamped `t_s` (seconds on the run's clock)."""
    waiting = snap.get("waiting_by_class", {})
    tiers = snap.get("tier_used_blocks", {})  # absent: an engine without tiers (the cells stay empty)
    return {
        "t_s": t_s,
        "num_blocks": snap["num_blocks"],
        "live_blocks": snap["live_blocks"],
        "retained_blocks": snap["retained_blocks"],
        "pinned_blocks": snap["pinned_blocks"],
        "cached_blocks": snap["cached_blocks"],
        "free_blocks": snap["free_blocks"],
        "usage": snap["usage"],
        "num_running": snap["num_running"],
        "num_waiting": snap["num_waiting"],
        "num_swapped": snap["num_swapped"],
        "waiting_system": waiting.get("system", 0),
        "waiting_interactive": waiting.get("interactive", 0),
        "waiting_batch": waiting.get("batch", 0),
        "fragmentation": snap["fragmentation"],
        "level": snap["level"],
        "host_tier_blocks": tiers.get("host"),
        "disk_tier_blocks": tiers.get("disk"),
        "source": "engine",
    }


def pool_state(snap: Mapping[str, Any]) -> dict[str, int]:
    """The pool as `meta.initial` (before the baseline) and `meta.final` (after the drain) record
    it: blocks by state, blocks promised to admitted requests that have not started, and the
    requests the engine holds. Both from this one function, so the capacity_after_drain gate
    compares like with like."""
    state = {
        key: int(snap[key])
        for key in (
            "num_blocks",
            "live_blocks",
            "retained_blocks",
            "pinned_blocks",
            "cached_blocks",
            "free_blocks",
            "pending_blocks",
        )
    }
    state["requests_in_engine"] = int(snap["num_running"] + snap["num_waiting"] + snap["num_swapped"])
    return state


def tenant_rows(snap: Mapping[str, Any], t_s: float, caps: Mapping[str, float]) -> list[dict[str, Any]]:
    """One tenant_samples.csv row per configured tenant (zero blocks included), with its hard cap."""
    live, num_blocks = snap.get("tenant_live_blocks", {}), snap["num_blocks"]
    return [
        {
            "t_s": t_s,
            "tenant": name,
            "live_blocks": live.get(name, 0),
            "share": live.get(name, 0) / num_blocks,
            "cap": cap,
            "source": ENGINE_SOURCE,
        }
        for name, cap in caps.items()
    ]
