"""prefix_routing: a fleet's routing finds the prefixes its replicas cache.

Two figures of a fleet behind kvgate's router (its `routed` events):

    fleet hit ratio   prompt tokens served from a prefix cache on the replica that took the
                      request, over every replica (`record.query.prefix_hit_rate` of the load);
                      what `kvgate matrix` holds against the round-robin baseline's
                      (gates/comparison.py, with the requests' effective number as its sample
                      size: `effective_sample_size`), and its own floor here (off by default: a
                      healthy ratio depends on how much the workload shares)
    index recall      prefix_aware only: of the prompt blocks the replicas found cached for the
                      requests the policy placed, the share the router expected there (the
                      `num_blocks` of its decision, capped at the blocks found). A router that
                      sees no cached block (its replicas' KV events off or lost: Dynamo's bug)
                      has a recall of 0 and routes by load alone, however healthy it looks

A stale index (events dropped, delayed, a router restart) lowers the recall without breaking
anything: the floor leaves room for that. Sessions kept on their replica are not the policy's
choice and are left out. Not measurable without a router's decisions or without a prefix hit.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.routing import final_decisions, not_a_fleet
from gates.sources import Source
from record.query import events_of, load_window, prefix_hit_rate, scheduled_prompt_tokens
from record.run_record import RunRecord

PREFIX_AWARE = "prefix_aware"


def effective_sample_size(weights) -> float:
    """Kish's effective number of requests behind a ratio weighted by prompt size, (Σw)² / Σw²:
    a few 7K-token prompts weigh as much as a hundred chat questions, and a hit ratio over them
    is as uncertain as one over a few requests (all n when every prompt is one size)."""
    total, squares = float(weights.sum()), float((weights**2).sum())
    return total * total / squares if squares else 0.0


class PrefixRoutingGate:
    name = "prefix_routing"
    sources = (Source.ENGINE_EVENTS,)
    title = "Routing finds the cached prefixes"
    metrics = {
        "min_hit_ratio": "fleet prompt tokens served from the prefix cache of the replica chosen, during the load",
        "min_index_recall": "prefix_aware: prompt blocks found cached that the router expected on that replica",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        routed = final_decisions(record)
        if routed.empty:
            return not_a_fleet(self.name)
        hit_ratio = prefix_hit_rate(record, load_window(record.meta))
        if hit_ratio is None:
            return GateResult.not_measurable(self.name, "no request was scheduled during the load")
        policy = str(routed["mode"].mode().iloc[0])
        measurements = [Measurement("min_hit_ratio", hit_ratio, limits["min_hit_ratio"], Unit.FRACTION, is_max=False)]
        weights = scheduled_prompt_tokens(record, load_window(record.meta)).dropna()
        evidence: dict = {
            "routing": policy,
            "fleet_hit_ratio": hit_ratio,
            "num_requests": len(routed),
            "effective_requests": effective_sample_size(weights),
        }
        explanation = f"{policy} routing: fleet prefix-hit ratio {hit_ratio:.1%} over {len(routed)} requests"
        if policy == PREFIX_AWARE:
            recall = self._recall(record, routed)
            if recall is not None:
                expected, found = recall
                value = expected / found
                measurements.append(
                    Measurement("min_index_recall", value, limits["min_index_recall"], Unit.FRACTION, is_max=False)
                )
                evidence.update(index_recall=value, blocks_found=found, blocks_expected=expected)
                explanation += (
                    f"; the router expected {expected} of the {found} cached prompt blocks found ({value:.0%})"
                )
        return GateResult.judged(self.name, measurements, explanation, evidence)

    def _recall(self, record: RunRecord, routed) -> tuple[int, int] | None:
        """(blocks the router expected and found, blocks found) over the policy's placements."""
        pool = record.meta.pool
        if pool is None:
            return None
        placed = routed[(routed["mode"] == PREFIX_AWARE) & (routed["reason"] == "policy")]
        scheduled = events_of(record, "scheduled").drop_duplicates("request_id").set_index("request_id")
        found = (scheduled["num_tokens"].reindex(placed.index).fillna(0) // pool.block_tokens).astype(int)
        if not found.sum():
            return None
        expected = placed["num_blocks"].fillna(0).astype(int).clip(upper=found)
        return int(expected.sum()), int(found.sum())
