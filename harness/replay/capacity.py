"""Does the configured GPU have the prefill throughput the trace asks for?

A trace replayed at its real rate can offer more prompt tokens per second than the simulated GPU
can prefill: then every request queues behind the last, TTFT grows without bound, and the
`interactive_ttft` and `goodput` verdicts measure the GPU's size rather than the policy. Replay
says so before it starts, with the `--rate-scale` that would fit, and the record keeps the note.

The ceiling is a step that spends its whole token budget (`max_num_batched_tokens`) on prefill,
one after the other, as the configured executor prices it; prefix-cache hits can lower the
demand below what is offered, and decodes take part of every step, so a trace near the ceiling
is overloaded too. The busiest minute matters more than the mean: a burst that outruns the GPU
for a minute leaves a queue that the rest of the hour pays for.
"""

from __future__ import annotations

import math
from contextlib import closing
from dataclasses import dataclass

from harness.replay.trace import Trace
from reference_engine import EngineConfig, EngineCore, VirtualClock

BUSY_WINDOW_S = 60.0
"""The window of the busiest stretch of a trace, in trace seconds after scaling."""


@dataclass(frozen=True)
class PrefillDemand:
    mean_tokens_per_s: float  # prompt tokens offered per second over the whole trace
    peak_tokens_per_s: float  # ... over its busiest BUSY_WINDOW_S
    ceiling_tokens_per_s: float  # what the configured GPU prefills per second at most

    @property
    def is_overloaded(self) -> bool:
        return self.peak_tokens_per_s > self.ceiling_tokens_per_s

    @property
    def fitting_rate_scale(self) -> float:
        """The --rate-scale (relative to this one) at which the busiest minute fits under the ceiling."""
        return self.ceiling_tokens_per_s / self.peak_tokens_per_s if self.peak_tokens_per_s else math.inf

    def note(self, rate_scale: float) -> str:
        """The warning a replay prints and records when the trace outruns the GPU."""
        fit = rate_scale * self.fitting_rate_scale
        return (
            f"the trace offers {self.mean_tokens_per_s:,.0f} prompt tokens/s ({self.peak_tokens_per_s:,.0f} in "
            f"its busiest {BUSY_WINDOW_S:.0f} s), more than the simulated GPU can prefill "
            f"({self.ceiling_tokens_per_s:,.0f} tokens/s at full steps): requests queue behind each other, and "
            f"TTFT and goodput verdicts measure the GPU's size rather than the policy. --rate-scale "
            f"{_round_down(fit)} or lower fits (a larger GPU or pool changes the ceiling)"
        )


def prefill_demand(trace: Trace, config: EngineConfig) -> PrefillDemand:
    """The prompt tokens per second a (scaled) trace offers against the configured GPU's ceiling."""
    total = sum(r.num_prompt_tokens for r in trace.requests)
    duration_s = trace.duration_s
    return PrefillDemand(
        mean_tokens_per_s=total / duration_s if duration_s > 0 else 0.0,
        peak_tokens_per_s=_busiest(trace),
        ceiling_tokens_per_s=prefill_ceiling(config),
    )


def prefill_ceiling(config: EngineConfig) -> float:
    """Prompt tokens per second of back-to-back steps that spend their whole budget on prefill."""
    budget = config.engine.max_num_batched_tokens
    with closing(EngineCore(config, clock=VirtualClock())) as core:
        return budget / core.executor.prefill_time_s(budget)


def _busiest(trace: Trace) -> float:
    """Prompt tokens per second in the busiest window (the whole trace when it is shorter)."""
    requests = trace.requests
    if not requests:
        return 0.0
    window_s = min(BUSY_WINDOW_S, trace.duration_s) or 1.0
    best = tokens = start = 0
    for r in requests:  # a sliding window over arrival order: O(n)
        tokens += r.num_prompt_tokens
        while r.arrival_s - requests[start].arrival_s > window_s:
            tokens -= requests[start].num_prompt_tokens
            start += 1
        best = max(best, tokens)
    return best / window_s


def _round_down(x: float) -> str:
    """A scale people can type: two significant digits, rounded down so that it does fit."""
    if x <= 0 or math.isinf(x):
        return f"{x:g}"
    digits = 1 - math.floor(math.log10(x))
    return f"{math.floor(x * 10**digits) / 10**digits:g}"
