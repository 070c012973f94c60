"""memory_level_off: live usage levels off near the evict watermark instead of growing.

A policy that keeps retained state in check holds the peak of live usage (running work plus
idle sessions and pins) near `watermarks.evict` however many sessions arrive; one that does not
climbs through the preempt and reject rungs toward the full pool. The gate bounds the load
peak at `evict + max_peak_over_evict`. The growth of the peak between the middle and the last
third of the load phase is kept as evidence, to tell "levelled off" from "still climbing".
"""

from __future__ import annotations

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.query import in_window, live_usage, load_window
from harness.run_record import RunRecord


class MemoryLevelOffGate:
    name = "memory_level_off"
    title = "Peak usage levels off near evict"
    metrics = {"max_peak_over_evict": "how far the peak of live usage may rise above the evict watermark"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        signals = record.meta.signals
        if not (signals.engine_samples or signals.prometheus) or record.samples.empty:
            return GateResult.not_measurable(self.name, "no usage samples in the record")
        evict = record.meta.watermarks.get("evict")
        if evict is None:
            return GateResult.not_measurable(self.name, "the target reports no evict watermark")
        load = in_window(record.samples, "t_s", load_window(record.meta))
        if load.empty:
            return GateResult.not_measurable(self.name, "no samples during load")
        usage = live_usage(load)
        peak_at = usage.idxmax()
        peak = float(usage[peak_at])
        evidence = {"peak": {"t_s": load.at[peak_at, "t_s"], "usage": peak}, "evict_watermark": evict,
                    "late_growth": _late_growth(load["t_s"], usage)}
        explanation = (f"live usage peaked at {peak:.1%} at t={load.at[peak_at, 't_s']:.1f} s; "
                       f"evict watermark {evict:.0%}")
        # Shown as usage against the ceiling it may reach, which reads better than a margin.
        measurement = Measurement("max_peak_over_evict", peak, evict + limits["max_peak_over_evict"], Unit.FRACTION)
        return GateResult.judged(self.name, [measurement], explanation, evidence)


def _late_growth(t_s: pd.Series, usage: pd.Series) -> float | None:
    """Peak of the last third of the load minus peak of the middle third (None if too short)."""
    if len(usage) < 6:
        return None
    start, end = t_s.min(), t_s.max()
    third = (end - start) / 3
    middle = usage[(t_s >= start + third) & (t_s < start + 2 * third)]
    last = usage[t_s >= start + 2 * third]
    return float(last.max() - middle.max()) if len(middle) and len(last) else None
