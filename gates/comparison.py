"""Rules over several judged runs of one load, which no single run's gates can apply.

    shortfalls = goodput_shortfalls(candidate_verdicts, baseline_verdicts)

`goodput_shortfalls`: no candidate may serve less of the offered chat in time than the best
baseline did (`goodput`'s measured share, gates/checks/goodput.py). A policy that loses to
`vllm_like` or `none` on goodput is no improvement, however its other gates read, so
`kvgate matrix` fails when this list is not empty.

"Less" means beyond the noise of the two measurements: each goodput is a share of a few hundred
offered requests (a quick run offers ~350), so two runs of one config already differ by a few
points (51.6 % and 62.3 % for default.toml on two quick runs). A candidate is short when the best
baseline's share exceeds its own by more than `NOISE_Z` standard errors of the difference of two
proportions, sqrt(p₁(1−p₁)/n₁ + p₂(1−p₂)/n₂), each p taken as (served + 1) / (offered + 2)
(Agresti and Caffo's adjustment: a short run that served all of its few requests has no
variance by the plain formula, and would make any candidate short of it): about 7.6 points for
two runs of 350 requests near 50 %, 41 points for 5 of 5 against 5 of 8. A run whose goodput was
not measured is left out; with no baseline measured, nothing can be short of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gates.base import Outcome
from gates.checks.goodput import METRIC, GoodputGate
from gates.verdict import Verdict

NOISE_Z = 2.0  # standard errors: a difference this unlikely (≈ 5 %) by chance alone is a shortfall


@dataclass(frozen=True)
class Goodput:
    """One run's measured goodput: the share served in time of `num_offered` requests."""

    run_id: str
    policy: str
    fraction: float
    num_offered: int

    def variance(self) -> float:
        """Of the share served, with one request served and one not added (see the module)."""
        n = self.num_offered + 2
        p = (self.fraction * self.num_offered + 1) / n
        return p * (1.0 - p) / n


@dataclass(frozen=True)
class GoodputShortfall:
    """A candidate run whose goodput is below the best baseline run's beyond the noise."""

    candidate: Goodput
    baseline: Goodput
    noise: float  # NOISE_Z standard errors of the difference

    def explanation(self) -> str:
        c, b = self.candidate, self.baseline
        return (
            f"{c.policy} ({c.run_id}) served {c.fraction:.1%} of {c.num_offered} offered critical chat requests "
            f"in time, below the baseline {b.policy} ({b.run_id}): {b.fraction:.1%} of {b.num_offered} "
            f"(beyond the noise of ±{self.noise:.1%})"
        )


def measured_goodput(verdict: Verdict) -> Goodput | None:
    """The goodput a verdict measured, or None (not run, not measurable)."""
    result = verdict.result(GoodputGate.name)
    if result is None or result.outcome is Outcome.NOT_MEASURABLE:
        return None
    fraction = next(m.value for m in result.measurements if m.metric == METRIC)
    return Goodput(verdict.run_id, verdict.policy, fraction, int(result.evidence["num_offered"]))


def goodput_shortfalls(candidates: Sequence[Verdict], baselines: Sequence[Verdict]) -> list[GoodputShortfall]:
    """Every candidate whose goodput is below the best baseline's beyond the noise (none
    without a measured baseline)."""
    measured = [g for v in baselines if (g := measured_goodput(v)) is not None]
    if not measured:
        return []
    best = max(measured, key=lambda g: g.fraction)
    shortfalls = []
    for candidate in filter(None, map(measured_goodput, candidates)):
        noise = NOISE_Z * math.sqrt(candidate.variance() + best.variance())
        if best.fraction - candidate.fraction > noise:
            shortfalls.append(GoodputShortfall(candidate, best, noise))
    return shortfalls
