"""memory_level_off: live usage levels off near the evict watermark instead of growing.

A policy that keeps retained state in check holds the peak of live usage (running work plus
idle sessions and pins) near `watermarks.evict` however many sessions arrive; one that does not
climbs through the preempt and reject rungs toward the full pool. The gate bounds the load
peak at `evict + max_peak_over_evict`. The growth of the peak between the middle and the last
third of the load phase is kept as evidence, to tell "levelled off" from "still climbing".

The peak is the highest of the usage samples and, where the engine reports them, the usage at
each `watermark` event of the load: samples every half second miss a peak that lasts a step or
two (an engine without eviction fills the pool, runs out of memory and drops back between two
samples: sampled peaks of 93.5 % and 94.9 % in runs whose engine entered the reject rung at
95.7 %), while a level change is recorded at the step that caused it.
"""

from __future__ import annotations

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import in_window, live_usage, load_window
from record.run_record import RunRecord


class MemoryLevelOffGate:
    name = "memory_level_off"
    sources = (Source.ENGINE_SAMPLES, Source.PROMETHEUS, Source.ENGINE_EVENTS)
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
        peak_t, peak, seen_by = _peak(load["t_s"], usage, _level_changes(record) if signals.engine_events else None)
        evidence = {
            "peak": {"t_s": peak_t, "usage": peak, "seen_by": seen_by},
            "evict_watermark": evict,
            "late_growth": _late_growth(load["t_s"], usage),
        }
        explanation = (
            f"live usage peaked at {peak:.1%} at t={peak_t:.1f} s"
            f"{' (a watermark event between samples)' if seen_by == 'event' else ''}; "
            f"evict watermark {evict:.0%}"
        )
        # Shown as usage against the ceiling it may reach, which reads better than a margin.
        measurement = Measurement("max_peak_over_evict", peak, evict + limits["max_peak_over_evict"], Unit.FRACTION)
        return GateResult.judged(self.name, [measurement], explanation, evidence)


def _level_changes(record: RunRecord) -> pd.DataFrame:
    """The load phase's `watermark` events: the usage at each level change, exact to the step."""
    events = in_window(record.events, "t_s", load_window(record.meta))
    return events[events["kind"] == "watermark"].dropna(subset=["usage"])


def _peak(t_s: pd.Series, usage: pd.Series, changes: pd.DataFrame | None) -> tuple[float, float, str]:
    """(time, usage, "sample" or "event") of the highest usage the samples or level changes show."""
    at = usage.idxmax()
    peak = (float(t_s[at]), float(usage[at]), "sample")
    if changes is not None and len(changes):
        top = changes["usage"].astype(float).idxmax()
        if float(changes.at[top, "usage"]) > peak[1]:
            peak = (float(changes.at[top, "t_s"]), float(changes.at[top, "usage"]), "event")
    return peak


def _late_growth(t_s: pd.Series, usage: pd.Series) -> float | None:
    """Peak of the last third of the load minus peak of the middle third (None if too short)."""
    if len(usage) < 6:
        return None
    start, end = t_s.min(), t_s.max()
    third = (end - start) / 3
    middle = usage[(t_s >= start + third) & (t_s < start + 2 * third)]
    last = usage[t_s >= start + 2 * third]
    return float(last.max() - middle.max()) if len(middle) and len(last) else None
