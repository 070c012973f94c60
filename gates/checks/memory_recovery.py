"""memory_recovery: memory falls back after load (no leak of in-flight KV).

Compares the KV held by work in flight (live minus retained idle sessions and pins) at the last
sample after the load phase (cooldown) with its peak during load. Retained state is left out on
purpose: keeping idle sessions until their timeout is a policy choice, judged by
`memory_level_off`; blocks still held by finished work are a leak.

How long the drain took is kept as evidence (`drain_to_baseline_s`): from the end of the load to
the first sample whose in-flight KV is back at the lowest level seen before the load (None:
it never was). Against an outside target polled every 50 ms (a cancel storm) it is exact to
that interval.
"""

from __future__ import annotations

import math

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import Window, active_usage, after_load_window, in_window, load_window
from record.run_record import RunRecord


class MemoryRecoveryGate:
    name = "memory_recovery"
    sources = (Source.ENGINE_SAMPLES, Source.PROMETHEUS)
    title = "Memory falls back after load"
    metrics = {"max_cooldown_fraction_of_peak": "in-flight KV at the end of cooldown / its peak under load"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        signals = record.meta.signals
        samples = record.samples
        if not (signals.engine_samples or signals.prometheus) or samples.empty:
            return GateResult.not_measurable(self.name, "no usage samples in the record")
        after_window = after_load_window(record.meta)
        if after_window is None:
            return GateResult.not_measurable(self.name, "no load phase: 'after load' is undefined")
        load = in_window(samples, "t_s", load_window(record.meta))
        after = in_window(samples, "t_s", after_window)
        if load.empty or after.empty:
            return GateResult.not_measurable(self.name, "no samples during load or after it")
        load_active, after_active = active_usage(load), active_usage(after)
        peak_at, last_at = load_active.idxmax(), after.index[-1]
        peak, last = float(load_active[peak_at]), float(after_active[last_at])
        if peak <= 0:
            return GateResult.not_measurable(self.name, "no KV was in use during load")
        evidence = {
            "peak": {"t_s": samples.at[peak_at, "t_s"], "active_usage": peak},
            "last_after_load": {
                "t_s": samples.at[last_at, "t_s"],
                "active_usage": last,
                "retained_blocks": samples.at[last_at, "retained_blocks"],
            },
            "drain_to_baseline_s": drain_to_baseline_s(samples, load_window(record.meta), after),
        }
        explanation = (
            f"in-flight KV fell from {peak:.1%} of the pool at peak to {last:.1%} "
            f"at t={samples.at[last_at, 't_s']:.1f} s after load"
        )
        measurement = Measurement(
            "max_cooldown_fraction_of_peak", last / peak, limits["max_cooldown_fraction_of_peak"], Unit.FRACTION
        )
        return GateResult.judged(self.name, [measurement], explanation, evidence)


def drain_to_baseline_s(samples: pd.DataFrame, load: Window, after: pd.DataFrame) -> float | None:
    """Seconds from the end of the load until in-flight KV is back at its level before the load
    (the lowest sample before it; 0 without one). None: it never got back."""
    before = samples[samples["t_s"] < load[0]]
    baseline = float(active_usage(before).min()) if len(before) else 0.0
    back = after[active_usage(after) <= baseline + 1e-9]
    if back.empty or math.isinf(load[1]):
        return None
    return max(0.0, float(back["t_s"].iloc[0]) - load[1])
