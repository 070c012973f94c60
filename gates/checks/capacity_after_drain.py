"""capacity_after_drain: after the cooldown the engine can admit as much as before the run.

Admission capacity is what a new request could get: blocks that are free, cached (refcount-0
prefixes, reused on demand) or held only by idle sessions that eviction can reclaim, less the
blocks promised to admitted requests that have not started; and the sequence slots no request
holds. The record keeps the pool before the first request (`meta.initial`) and after the
cooldown (`meta.final`) in the same keys (harness/sample_rows.py `pool_state`); a run whose
capacity is not back — blocks held by no one, a reservation never released, a request stuck in
the engine, work still running for clients long gone — leaves a live process serving with less
than it started with, and that is not healthy.

    capacity blocks = free + cached + (retained − pinned) − pending
    slots lost      = requests in the engine after − before
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.run_record import RunRecord

KEYS = ("free_blocks", "cached_blocks", "retained_blocks", "pinned_blocks", "pending_blocks", "requests_in_engine")
LOST_BLOCKS, LOST_SLOTS = "max_lost_blocks", "max_lost_slots"


def capacity_blocks(state: Mapping[str, Any]) -> int:
    """Blocks a new request could be given: free, cached and reclaimable, less those promised."""
    reclaimable = max(0, int(state["retained_blocks"]) - int(state["pinned_blocks"]))
    return int(state["free_blocks"]) + int(state["cached_blocks"]) + reclaimable - int(state["pending_blocks"])


class CapacityAfterDrainGate:
    name = "capacity_after_drain"
    sources = (Source.ENGINE_STATE,)
    title = "Capacity back after the drain"
    metrics = {
        LOST_BLOCKS: "admission capacity in blocks before the run minus after the cooldown",
        LOST_SLOTS: "requests the engine holds after the cooldown minus before the run",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        initial, final = record.meta.initial, record.meta.final
        if not set(KEYS) <= set(initial) & set(final):
            return GateResult.not_measurable(
                self.name, "no pool state before the run (meta.initial) and after it (meta.final) in the record"
            )
        before, after = capacity_blocks(initial), capacity_blocks(final)
        lost_blocks = before - after
        lost_slots = int(final["requests_in_engine"]) - int(initial["requests_in_engine"])
        evidence = {
            "initial": {k: initial[k] for k in KEYS},
            "final": {k: final[k] for k in KEYS},
            "capacity_blocks": {"initial": before, "final": after},
        }
        explanation = (
            f"admission capacity {after:,} blocks after the cooldown against {before:,} before the run; "
            f"{int(final['requests_in_engine'])} requests still held"
        )
        measurements = [
            Measurement(metric, lost, limits[metric], Unit.COUNT)
            for metric, lost in ((LOST_BLOCKS, lost_blocks), (LOST_SLOTS, lost_slots))
        ]
        return GateResult.judged(self.name, measurements, explanation, evidence)
