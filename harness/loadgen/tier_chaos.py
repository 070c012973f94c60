"""The KV tier chaos schedule: what the `tier_chaos` scenario asks `/admin/tiers/chaos` for, step
by step (the reference engine's admin API, docs/server.md).

One step every `--kvgate-tier-chaos-interval-s`, in this order, then again from the top:

    load_failures      a share of the loads fails (`--kvgate-tier-chaos-failure-rate`)
    slow_reads         every tier's read bandwidth cut by `--kvgate-tier-chaos-slowdown` (10x)
    restore_reads      the bandwidth back
    detach_disk        the disk unplugged (its blocks gone; loads from it in flight fail)
    reattach_disk      the disk back, empty
    no_load_failures   the failures stop

So the failures overlap the slow link and the unplugged disk, and every change is undone within
one cycle. Steps that name a tier the engine lacks are left out (a host-only engine has no disk
to unplug). `restore` undoes everything, for the scenario's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChaosStep:
    name: str
    bodies: tuple[Body, ...]  # one `/admin/tiers/chaos` call each


def schedule(tiers: Sequence[str], slowdown: float, failure_rate: float) -> list[ChaosStep]:
    """The steps for an engine with `tiers` (names of its tiers, e.g. ["host", "disk"])."""

    def each_tier(**change: Any) -> tuple[Body, ...]:
        return tuple({"tier": t, **change} for t in tiers)

    disk = ("disk",) if "disk" in tiers else ()
    steps = [
        ChaosStep("load_failures", ({"load_failure_rate": failure_rate},)),
        ChaosStep("slow_reads", each_tier(read_slowdown=slowdown)),
        ChaosStep("restore_reads", each_tier(read_slowdown=1.0)),
        ChaosStep("detach_disk", tuple({"tier": t, "attached": False} for t in disk)),
        ChaosStep("reattach_disk", tuple({"tier": t, "attached": True} for t in disk)),
        ChaosStep("no_load_failures", ({"load_failure_rate": 0.0},)),
    ]
    return [s for s in steps if s.bodies]


def restore(tiers: Sequence[str]) -> list[Body]:
    """The calls that leave the tiers chaos-free: attached, full speed, no failures (none
    without tiers)."""
    if not tiers:
        return []
    return [
        *({"tier": t, "attached": True} for t in tiers),
        *({"tier": t, "read_slowdown": 1.0} for t in tiers),
        {"load_failure_rate": 0.0},
    ]
