"""Replay says when a trace offers more prefill than the configured GPU serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.replay.capacity import BUSY_WINDOW_S, prefill_ceiling, prefill_demand
from harness.replay.trace import Trace, TraceRequest
from reference_engine import EngineConfig, with_overrides


def trace(*sends: tuple[float, int]) -> Trace:
    requests = [
        TraceRequest(row=i + 1, arrival_s=t, num_prompt_tokens=n, num_output_tokens=8) for i, (t, n) in enumerate(sends)
    ]
    return Trace(format="test", source=Path("t.jsonl"), requests=requests)


def test_the_ceiling_is_full_prefill_steps_of_the_configured_gpu() -> None:
    h100, h200 = EngineConfig(), with_overrides(EngineConfig(), {"hardware.gpu": "h200"})
    assert prefill_ceiling(h100) > 10_000
    assert prefill_ceiling(h200) >= prefill_ceiling(h100)  # a bigger GPU prefills at least as fast


def test_the_busiest_window_is_judged_not_only_the_mean() -> None:
    ceiling = prefill_ceiling(EngineConfig())
    burst = int(ceiling * BUSY_WINDOW_S * 2)  # two minutes' worth in one minute
    quiet_hour = [(60.0 * i, 100) for i in range(2, 60)]
    demand = prefill_demand(trace((0.0, burst), (30.0, 100), *quiet_hour), EngineConfig())
    assert demand.mean_tokens_per_s < ceiling < demand.peak_tokens_per_s and demand.is_overloaded
    assert demand.fitting_rate_scale == pytest.approx(ceiling / demand.peak_tokens_per_s)
    note = demand.note(rate_scale=1.0)
    assert "--rate-scale 0.49 or lower fits" in note and "prompt tokens/s" in note


def test_a_trace_under_the_ceiling_says_nothing() -> None:
    demand = prefill_demand(trace(*((float(t), 1000) for t in range(600))), EngineConfig())
    assert demand.peak_tokens_per_s == pytest.approx(1000 * 61 / 60) and not demand.is_overloaded
