"""Rules over several judged runs of one load, which no single run's gates can apply.

    shortfalls = goodput_shortfalls(candidate_verdicts, baseline_verdicts)
    hit_ratio_shortfalls(candidate_verdicts, baseline_verdicts)

`goodput_shortfalls`: no candidate may serve less of the offered chat in time than the best
baseline did (`goodput`'s measured share, gates/checks/goodput.py). A policy that loses to
`vllm_like` or `none` on goodput is no improvement, however its other gates read, so
`kvgate matrix` fails when this list is not empty.

"Less" means beyond the noise of the two measurements: each goodput is a share of a few hundred
offered requests (a quick run offers ~350), so two runs of one config already differ by a few
points (51.6 % and 62.3 % for default.toml on two quick runs). A candidate is short when the best
baseline's share exceeds its own beyond the noise of gates/noise.py: `NOISE_Z` standard errors
of the difference of two proportions, sqrt(p₁(1−p₁)/n₁ + p₂(1−p₂)/n₂), each p taken as
(served + 1) / (offered + 2) (Agresti and Caffo's adjustment: a short run that served all of its
few requests has no variance by the plain formula, and would make any candidate short of it):
about 7.4 points for two runs of 350 requests near 50 %, 40 points for 5 of 5 against 5 of 8. A run whose goodput was
not measured is left out; with no baseline measured, nothing can be short of it.

`hit_ratio_shortfalls`: no fleet candidate may find fewer of its prompt tokens in its replicas'
prefix caches than the round-robin baseline did (`prefix_routing`'s fleet hit ratio,
gates/checks/prefix_routing.py): a router that cannot beat chance placement has no reason to
look at prefixes. The same noise rule, with the requests' effective number as the sample size:
a request's blocks hit or miss together (counting tokens would understate the noise), and the
ratio weighs requests by their prompts, so a few long ones count like many short ones (Kish's
(Σw)² / Σw²: ~90 of the ~330 requests of a quick fleet run). With the plain request count, two
quick runs of one mixed load, whose session turns and kills fall differently, differed beyond
it (5.3 % against 11.7 %).

Both rules judge a `MeasuredShare` with `beyond_noise`, which asks gates/noise.py: the one
place the noise model lives, shared with the release gate and the comparison's decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gates.base import Outcome
from gates.checks.goodput import METRIC, GoodputGate
from gates.checks.prefix_routing import PrefixRoutingGate
from gates.noise import Estimate, difference, share_estimate
from gates.verdict import Verdict


@dataclass(frozen=True)
class MeasuredShare:
    """One run's measured share of `num_offered` trials (goodput: requests served in time)."""

    run_id: str
    policy: str
    fraction: float
    num_offered: int

    def estimate(self) -> Estimate:
        """The share with its sampling variance (gates/noise.py `share_estimate`)."""
        return share_estimate(self.fraction, self.num_offered)


Goodput = MeasuredShare


def beyond_noise(candidate: MeasuredShare, baseline: MeasuredShare) -> float | None:
    """The noise of the difference (gates/noise.py) when `baseline` exceeds `candidate` by more
    than it; None when the candidate is not short of it."""
    d = difference([baseline.estimate()], [candidate.estimate()])
    return d.noise if d is not None and d.delta > d.noise else None


@dataclass(frozen=True)
class GoodputShortfall:
    """A candidate run whose goodput is below the best baseline run's beyond the noise."""

    candidate: MeasuredShare
    baseline: MeasuredShare
    noise: float  # of the difference (gates/noise.py)

    def explanation(self) -> str:
        c, b = self.candidate, self.baseline
        return (
            f"{c.policy} ({c.run_id}) served {c.fraction:.1%} of {c.num_offered} offered critical chat requests "
            f"in time, below the baseline {b.policy} ({b.run_id}): {b.fraction:.1%} of {b.num_offered} "
            f"(beyond the noise of ±{self.noise:.1%})"
        )


def measured_goodput(verdict: Verdict) -> MeasuredShare | None:
    """The goodput a verdict measured, or None (not run, not measurable)."""
    result = verdict.result(GoodputGate.name)
    if result is None or result.outcome is Outcome.NOT_MEASURABLE:
        return None
    fraction = next(m.value for m in result.measurements if m.metric == METRIC)
    return MeasuredShare(verdict.run_id, verdict.policy, fraction, int(result.evidence["num_offered"]))


def goodput_shortfalls(candidates: Sequence[Verdict], baselines: Sequence[Verdict]) -> list[GoodputShortfall]:
    """Every candidate whose goodput is below the best baseline's beyond the noise (none
    without a measured baseline)."""
    measured = [g for v in baselines if (g := measured_goodput(v)) is not None]
    if not measured:
        return []
    best = max(measured, key=lambda g: g.fraction)
    shortfalls = []
    for candidate in filter(None, map(measured_goodput, candidates)):
        if (noise := beyond_noise(candidate, best)) is not None:
            shortfalls.append(GoodputShortfall(candidate, best, noise))
    return shortfalls


ROUND_ROBIN = "round_robin"


@dataclass(frozen=True)
class HitRatioShortfall:
    """A fleet candidate whose prefix-hit ratio is below the round-robin baseline's beyond the noise."""

    candidate: MeasuredShare
    baseline: MeasuredShare
    routing: str
    noise: float

    def explanation(self) -> str:
        c, b = self.candidate, self.baseline
        return (
            f"{c.policy} ({c.run_id}) routed by {self.routing} found {c.fraction:.1%} of its prompt tokens in "
            f"its replicas' prefix caches over an effective {c.num_offered} requests, below the round-robin "
            f"baseline ({b.run_id}): {b.fraction:.1%} over {b.num_offered} (beyond the noise of ±{self.noise:.1%})"
        )


def measured_hit_ratio(verdict: Verdict) -> tuple[MeasuredShare, str] | None:
    """The fleet hit ratio a verdict measured and the routing policy behind it, or None."""
    result = verdict.result(PrefixRoutingGate.name)
    if result is None or result.outcome is Outcome.NOT_MEASURABLE:
        return None
    e = result.evidence
    share = MeasuredShare(verdict.run_id, verdict.policy, float(e["fleet_hit_ratio"]), round(e["effective_requests"]))
    return share, str(e["routing"])


def hit_ratio_shortfalls(candidates: Sequence[Verdict], baselines: Sequence[Verdict]) -> list[HitRatioShortfall]:
    """Every fleet candidate whose hit ratio is below the best round-robin baseline's beyond the
    noise (none without a measured round-robin baseline)."""
    round_robin = [m[0] for v in baselines if (m := measured_hit_ratio(v)) is not None and m[1] == ROUND_ROBIN]
    if not round_robin:
        return []
    best = max(round_robin, key=lambda s: s.fraction)
    shortfalls = []
    for candidate, routing in filter(None, map(measured_hit_ratio, candidates)):
        if (noise := beyond_noise(candidate, best)) is not None:
            shortfalls.append(HitRatioShortfall(candidate, best, routing, noise))
    return shortfalls
