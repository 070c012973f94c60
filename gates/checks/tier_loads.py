"""tier_loads: the KV tiers below the GPU pool fail safe — a bounded wait, no wrong block, no leak.

An engine with host or disk tiers loads a request's evicted prefix back instead of recomputing
it. That is only a win when it is safe: a load slower than re-prefilling (a slow disk, a link
shared by many loads) must not hold the request, a block whose copy failed (a checksum, a disk
that went away) must never be served, and every block a tier took must leave it again or still
be there once the run drained. The engine reports each load (`tier_load` events: the source
tier, blocks, load time, and how it ended) and its tiers after the drain (`meta.final.tiers`).

    load wait       the longest time a request waited on a load that was served or failed
    wrong blocks    blocks served from a load that failed (`served_corrupt`: the fallback off)
    leaked blocks   blocks a tier lost track of, plus loads still in flight after the drain

A run whose engine has no tiers (no tier_load event, no `final.tiers`) is not measurable.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.run_record import RunRecord

WAITED = ("ok", "failed", "served_corrupt")  # the loads a request waited for (the rest never started)


class TierLoadsGate:
    name = "tier_loads"
    sources = (Source.ENGINE_EVENTS, Source.ENGINE_STATE)
    title = "KV tier loads bounded, never wrong, nothing leaked"
    metrics = {
        "max_load_wait_s": "longest wait of a request on a load from host or disk",
        "max_wrong_blocks_served": "blocks served from a load whose copy failed",
        "max_leaked_blocks": "tier blocks lost track of, and loads still in flight, after the drain",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        events = record.events
        loads = events[events["kind"] == "tier_load"]
        tiers = record.meta.final.get("tiers")
        if loads.empty and not tiers:
            return GateResult.not_measurable(self.name, "no KV tiers: no tier_load event and no tiers after the drain")
        waited = loads[loads["reason"].isin(WAITED)]
        wait_s = float(waited["latency_s"].max()) if not waited.empty else 0.0
        wrong = int(loads.loc[loads["reason"] == "served_corrupt", "num_blocks"].sum())
        by_reason = {str(k): int(v) for k, v in loads.groupby("reason")["num_blocks"].sum().items()}
        measurements = [
            Measurement("max_load_wait_s", wait_s, limits["max_load_wait_s"], Unit.SECONDS),
            Measurement("max_wrong_blocks_served", wrong, limits["max_wrong_blocks_served"], Unit.COUNT),
        ]
        evidence: dict = {"blocks_by_outcome": by_reason, "loads": len(loads)}
        leak_text = "no tier state after the drain"
        if tiers:
            leaked = sum(int(t.get("leaked_blocks", 0)) for t in tiers.values())
            leaked += int(record.meta.final.get("tier_loads_in_flight", 0))
            measurements.append(Measurement("max_leaked_blocks", leaked, limits["max_leaked_blocks"], Unit.COUNT))
            evidence["tiers"] = tiers
            leak_text = f"{leaked} blocks leaked or loading after the drain"
        explanation = (
            f"{len(waited)} loads waited for, the longest {wait_s:.3g} s; {wrong} blocks served from failed "
            f"loads; {leak_text}"
        )
        return GateResult.judged(self.name, measurements, explanation, evidence)
