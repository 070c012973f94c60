"""How well one set of measurements tells itself from another: ROC AUC with a confidence interval.

    auc = roc_auc(slower=cold_ttfts, faster=warm_ttfts)
    auc.value, auc.low, auc.high          # 0.5: no better than a coin; 1: every pair told apart

The AUC is the chance that a value drawn from `slower` exceeds one drawn from `faster` (ties
count half): the Mann-Whitney U over the number of pairs. It is what an observer who sees one
TTFT of each kind achieves by guessing the longer one is cold, and the figure vLLM's security
notes give for the prefix cache's timing channel (0.99 with 8 tokens). It assumes nothing about
the shape of either distribution, so the long tails of TTFTs do no harm.

Its interval is Hanley and McNeil's (1982) normal approximation, at kvgate's one confidence level
(`gates.noise.NOISE_Z`, 95 % two-sided). Their variance
is 0 at an AUC of exactly 0 or 1, which would make a perfect separation of a few samples look
certain to the last digit; it is evaluated at (U + ½) / (n₁n₂ + 1), which leaves a perfect
separation of 24 against 24 a lower bound of ≈ 0.99 and of 4 against 4 ≈ 0.87. O(n log n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gates.noise import NOISE_Z


@dataclass(frozen=True)
class Auc:
    value: float
    low: float
    high: float
    num_slower: int
    num_faster: int

    def text(self) -> str:
        return f"AUC {self.value:.2f} [{self.low:.2f}, {self.high:.2f}]"

    def as_dict(self) -> dict[str, float]:
        return {"auc": round(self.value, 4), "low": round(self.low, 4), "high": round(self.high, 4)}


def roc_auc(slower: Sequence[float], faster: Sequence[float]) -> Auc:
    """P(a value of `slower` > one of `faster`) + ½ P(equal), with its 95 % interval. Both
    samples must be non-empty (a caller with fewer has nothing to judge)."""
    if not slower or not faster:
        raise ValueError("an AUC needs at least one value on each side")
    a, b = np.sort(np.asarray(slower, dtype=float)), np.asarray(faster, dtype=float)
    below = np.searchsorted(a, b, side="right")  # values of `slower` <= each of `faster`
    ties = below - np.searchsorted(a, b, side="left")
    n1, n2 = len(a), len(b)
    u = float(np.sum(n1 - below) + 0.5 * np.sum(ties))
    value = u / (n1 * n2)
    smoothed = (u + 0.5) / (n1 * n2 + 1)
    q1, q2 = smoothed / (2 - smoothed), 2 * smoothed**2 / (1 + smoothed)
    var = (smoothed * (1 - smoothed) + (n1 - 1) * (q1 - smoothed**2) + (n2 - 1) * (q2 - smoothed**2)) / (n1 * n2)
    half = NOISE_Z * math.sqrt(max(var, 0.0))
    return Auc(value, max(0.0, value - half), min(1.0, value + half), n1, n2)
