"""eviction_thrash: eviction is a trickle, not a churn (evictions/s < 1 % of the pool).

Evicted blocks per second as a fraction of the pool, from two sources added together:
  - `evicted` events (retained state: idle sessions, ...) over the load phase;
  - cached prefix blocks reclaimed for reuse, which are too many to log one by one and come
    as a run total in `meta.final.num_evicted_cached_blocks`, spread over the whole run.
When the log has prompt sizes (`admitted.num_tokens`) and prefix-cache hits
(`scheduled.num_tokens`), the prefix hit rate is bounded below too; its default 0 leaves it
off, since a healthy rate depends on how much the workload shares (set it for yours). The
busiest second of `evicted` events is kept as evidence.
"""

from __future__ import annotations

import math

from gates.base import GateResult, Limits, Measurement, Unit
from gates.query import WHOLE_RUN, events_of, in_window, load_window, pool_blocks, window_duration_s
from harness.run_record import RunRecord


class EvictionThrashGate:
    name = "eviction_thrash"
    title = "No eviction thrash"
    metrics = {
        "max_evicted_fraction_per_s": "evicted blocks per second under load / pool blocks",
        "min_prefix_hit_rate": "prefix-cache hit tokens / prompt tokens under load (0: not judged)",
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
        evidence: dict = {"evicted_blocks": float(blocks.sum()), "num_evictions": len(evicted),
                          "pool_blocks": num_blocks, "load_s": duration_s}
        cached = record.meta.final.get("num_evicted_cached_blocks")
        run_s = window_duration_s(record, WHOLE_RUN)
        if cached is not None and run_s:
            blocks_per_s += float(cached) / run_s
            evidence["evicted_cached_blocks"] = cached
        rate = blocks_per_s / num_blocks
        measurements = [Measurement("max_evicted_fraction_per_s", rate, limits["max_evicted_fraction_per_s"],
                                    Unit.FRACTION_PER_S)]
        if len(evicted):
            per_second = blocks.groupby(evicted["t_s"].map(math.floor)).sum()
            evidence["busiest_second"] = {"t_s": int(per_second.idxmax()), "evicted_blocks": per_second.max()}
        explanation = f"{blocks_per_s:.1f} blocks evicted per second ({rate:.3%} of the pool/s)"
        if cached is not None:
            explanation += f", {blocks.sum():.0f} from events and {cached:.0f} cached prefix blocks in the run"
        prompt = in_window(events_of(record, "admitted"), "t_s", window)["num_tokens"].sum()
        if prompt > 0:
            hits = in_window(events_of(record, "scheduled"), "t_s", window)["num_tokens"].sum()
            measurements.append(Measurement("min_prefix_hit_rate", hits / prompt, limits["min_prefix_hit_rate"],
                                             Unit.FRACTION, is_max=False))
            explanation += f"; prefix hit rate {hits / prompt:.1%}"
        return GateResult.judged(self.name, measurements, explanation, evidence)
