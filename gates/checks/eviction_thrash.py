"""eviction_thrash: eviction is a trickle, not a churn (evictions/s < 1 % of the pool).

What is judged is the eviction of state that still counted as *usage*: `evicted` events (idle
sessions and other retained KV a later request would have used), in blocks per second of the
load phase, as a fraction of the pool. The busiest second is kept as evidence.

Cached prefix blocks reclaimed for reuse (`meta.final.num_evicted_cached_blocks`) are reported
beside it, not judged by the rate. They are refcount-0 blocks — free memory, as vLLM counts
them — and once the cache has filled the pool, every new prompt block reclaims one: their rate
is the rate of new unique prompt tokens, the same under every policy for the same load, so it
measures throughput against pool size rather than thrash, and any load that keeps a pool full
would fail it (a short CI run on a small simulated pool, or a production server at 10K new
prompt tokens/s, 2.3 % of the default pool per second). Whether the cached tier keeps what is
reused is what the prefix hit rate says (`gates.query.prefix_hit_rate`): when the log has prompt
sizes (`num_tokens` of the `admitted` or `queued` event each request emits on arrival) and
prefix-cache hits (`scheduled.num_tokens`), it is bounded below by `min_prefix_hit_rate`, whose
default 0 leaves it off, since a healthy rate depends on how much the workload shares.
"""

from __future__ import annotations

import math

from gates.base import GateResult, Limits, Measurement, Unit
from gates.query import (WHOLE_RUN, events_of, in_window, load_window, pool_blocks, prefix_hit_rate,
                          window_duration_s)
from harness.run_record import RunRecord


class EvictionThrashGate:
    name = "eviction_thrash"
    title = "No eviction thrash"
    metrics = {
        "max_evicted_fraction_per_s": "blocks of retained state (idle sessions) evicted per second under load / pool",
        "min_prefix_hit_rate": ("prefix-cache hit tokens / prompt tokens of the requests scheduled under load "
                                "(0: not judged)"),
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if not record.meta.signals.engine_events:
            return GateResult.not_measurable(self.name, "no engine events: evictions are unknown")
        num_blocks = pool_blocks(record)
        window = load_window(record.meta)
        duration_s = window_duration_s(record, window)
        if not num_blocks or not duration_s:
            return GateResult.not_measurable(self.name, "pool size or load duration unknown")
        evicted = in_window(events_of(record, "evicted"), "t_s", window)
        blocks = evicted["num_blocks"].fillna(1)
        blocks_per_s = float(blocks.sum()) / duration_s
        rate = blocks_per_s / num_blocks
        evidence: dict = {"evicted_blocks": float(blocks.sum()), "num_evictions": len(evicted),
                          "pool_blocks": num_blocks, "load_s": duration_s}
        if len(evicted):
            per_second = blocks.groupby(evicted["t_s"].map(math.floor)).sum()
            evidence["busiest_second"] = {"t_s": int(per_second.idxmax()), "evicted_blocks": per_second.max()}
            evidence["evicted_by_reason"] = evicted["reason"].value_counts().to_dict()
        measurements = [Measurement("max_evicted_fraction_per_s", rate, limits["max_evicted_fraction_per_s"],
                                    Unit.FRACTION_PER_S)]
        explanation = (f"{blocks_per_s:.1f} blocks of retained state evicted per second "
                       f"({rate:.3%} of the pool/s)")
        cached = record.meta.final.get("num_evicted_cached_blocks")
        run_s = window_duration_s(record, WHOLE_RUN)
        if cached is not None and run_s:
            evidence["evicted_cached_blocks"] = cached
            evidence["cached_reclaimed_fraction_per_s"] = float(cached) / run_s / num_blocks
            explanation += f"; {cached:.0f} cached prefix blocks reclaimed for reuse (reported, not judged)"
        hit_rate = prefix_hit_rate(record, window)
        if hit_rate is not None:
            measurements.append(Measurement("min_prefix_hit_rate", hit_rate, limits["min_prefix_hit_rate"],
                                             Unit.FRACTION, is_max=False))
            explanation += f"; prefix hit rate {hit_rate:.1%}"
        return GateResult.judged(self.name, measurements, explanation, evidence)
