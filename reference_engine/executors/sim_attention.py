"""The sim executor's synthetic attention: what h2o accumulates when no real model runs.

Real attention is heavy-tailed and has sinks: the first few tokens of a sequence draw a large,
steady share of every query's attention, and among the rest a small set of tokens (heavy
hitters) draws most of it, the same tokens step after step. The sim reproduces that shape,
deterministically, as a function of (request, absolute position) only:

    sinks    positions 0 .. SINK_TOKENS − 1 share SINK_MASS of each query's mass equally;
    others   share the rest in proportion to w(p) = u(p) ^ (−1 / PARETO_ALPHA),
             u(p) ∈ (0, 1] a hash of (request seed, p): Pareto weights, a few very large

so a token's share depends on which tokens are still held (it is normalised over them), but
its rank never changes. A step of `num_new` tokens spreads a mass of `num_new` (one per query),
like the torch executor's `StepOutcome.attention`; causality inside a chunk is ignored.
"""

from __future__ import annotations

import numpy as np

SINK_TOKENS = 4
SINK_MASS = 0.25
PARETO_ALPHA = 1.2
_GOLDEN, _MIX = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)


def synthetic_attention(seed: int, positions: np.ndarray, num_new: int) -> np.ndarray:
    """Mass per KV token (at absolute `positions`, in KV order) for a step of `num_new` queries."""
    x = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) ^ (positions.astype(np.uint64) * _GOLDEN)
    x = x * _MIX
    u = ((x >> np.uint64(11)).astype(np.float64) + 1.0) / 2.0**53
    weights = u ** (-1.0 / PARETO_ALPHA)
    sinks = positions < SINK_TOKENS
    num_sinks = int(sinks.sum())
    others = 1.0 - SINK_MASS if num_sinks else 1.0
    weights[sinks] = 0.0
    total = weights.sum()
    mass = weights * (others / total) if total > 0 else weights
    if num_sinks:
        mass[sinks] = (SINK_MASS if total > 0 else 1.0) / num_sinks
    return mass * num_new
