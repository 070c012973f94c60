"""The one noise model: when runs differ by more than chance, for every rule that compares runs.

    a = [percentile_estimate(ttfts, 95) for ttfts in candidate_runs]     # one Estimate per run
    b = [percentile_estimate(ttfts, 95) for ttfts in baseline_runs]
    d = difference(a, b)                # mean(a) - mean(b), with the noise around it; None: unknown
    d.beyond_noise, d.low, d.high       # the difference clears the noise / its interval
    d.repeats_needed(effect)            # runs per side for a difference `effect` to clear it

The release gate (`kvgate gate --against`, gates/regression.py), the matrix's goodput and
hit-ratio shortfalls (gates/comparison.py), the comparison's decision (reports/decision.py) and
the prefix-timing AUC (gates/auc.py) all read `NOISE_Z` and `difference` from here, and nowhere
else.

**One run's value** is an `Estimate`: the number, and where the run's own samples say it, the
variance of that number from sampling alone (`sampling_var`):
- a percentile of per-request values (TTFT): the variance of the statistic over `RESAMPLES`
  bootstrap resamples of the requests, with a fixed seed (the same record gives the same answer);
- a ratio of per-request sums (prefix hit tokens / prompt tokens): the same bootstrap, resampling
  requests (a request's blocks hit or miss together);
- a share of trials (goodput): Agresti and Caffo's p(1-p)/n with p = (k+1)/(n+2), so that a run
  that served all of its few requests is not taken as certain;
- a count of independent events (preemptions, refusals): Poisson, its variance its value;
- anything else (peak usage, a gate's value): none, only the spread of repeats can say.

**Two sets of runs** (a candidate against stored baselines; one config's repeats against
another's) differ by d = mean(a) - mean(b). A run's value varies by sampling and by what the
run met (the machine, the arrivals, the order in which locust's users met each other): the
noise is the wider of
- the sampling noise: NOISE_Z · sqrt(mean of the runs' `sampling_var`), and
- the repeats' own spread: Student's t at the same level (`t_quantile`) for its degrees of
  freedom · s (pooled over both sides, where a side ran more than once): two or three repeats
  guess σ poorly, and t says how poorly,
times sqrt(1/n_a + 1/n_b). One closed-loop run's requests are not independent (a burst slows
many at once) and three repeats guess their spread poorly: measured on the quick profile
(bench/bench_regression.py), taking the sampling noise alone wherever the repeats happened to
spread less called 13 % of unchanged runs regressed; the wider of the two, its 5 % shared
among the metrics of a verdict (below), none of 60. Without any
sampling variance the spread alone needs 2 degrees of freedom (a candidate against 3 baselines;
two configs twice each); with one run per side and no sampling variance there is no noise model:
`difference` says None, never "beyond". A verdict that asks many questions at once (the release
gate, ~25 metrics, any of which fails it) passes `family`: each question then leaves out
`tail(family)`, NOISE_Z's tail shared among them (Bonferroni).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

NOISE_Z = 1.959964
"""Two-sided 95 %: a difference this far out happens by chance alone once in twenty comparisons.
The only confidence level in kvgate; `t_quantile` and `gates/auc.py` derive theirs from it."""

RESAMPLES = 400  # bootstrap resamples of one run's requests: the variance to within ~7 %
SEED = 20261203  # fixed: judging a record twice gives the same answer
MIN_DEGREES_OF_FREEDOM = 2  # of the repeats' spread, when it is the only noise known


@dataclass(frozen=True)
class Estimate:
    """One run's value of a metric; `sampling_var`: its variance from the run's own samples
    (None: the run alone cannot say)."""

    value: float
    sampling_var: float | None = None


def share_estimate(fraction: float, num_trials: int) -> Estimate:
    """A share of `num_trials`, with Agresti and Caffo's variance (one success and one failure
    added: a run that served 5 of 5 is not certain)."""
    n = num_trials + 2
    p = (fraction * num_trials + 1) / n
    return Estimate(fraction, p * (1.0 - p) / n)


def count_estimate(count: float) -> Estimate:
    """A count of independent events (Poisson): as variable as it is large."""
    return Estimate(float(count), float(count))


def bootstrap_estimate(rows: np.ndarray, statistic: Callable[[np.ndarray], float]) -> Estimate | None:
    """`statistic` of the rows (one per request), with its variance over `RESAMPLES` resamples of
    the rows (seeded). None when there are no rows or the statistic is not finite (a P95 that is a
    timeout: infinite)."""
    rows = np.asarray(rows, dtype=float)
    if len(rows) == 0:
        return None
    value = float(statistic(rows))
    if not math.isfinite(value):
        return None
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(rows), size=(RESAMPLES, len(rows)))
    resampled = np.array([statistic(rows[p]) for p in picks], dtype=float)
    finite = resampled[np.isfinite(resampled)]
    variance = float(np.var(finite, ddof=1)) if len(finite) > 1 and len(finite) == len(resampled) else None
    return Estimate(value, variance)


def ratio_estimate(numerators: Sequence[float], denominators: Sequence[float]) -> Estimate | None:
    """Σ numerators / Σ denominators over requests (hit tokens / prompt tokens), bootstrapped by
    request. None without a positive denominator."""
    rows = np.column_stack([np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)])
    rows = rows[~np.isnan(rows).any(axis=1)]
    if len(rows) == 0 or rows[:, 1].sum() <= 0:
        return None
    return bootstrap_estimate(rows, _ratio)


def _ratio(rows: np.ndarray) -> float:
    total = rows[:, 1].sum()
    return float(rows[:, 0].sum() / total) if total > 0 else math.nan


@dataclass(frozen=True)
class Difference:
    """mean(a) - mean(b) and the noise around it (NOISE_Z standard errors, or Student's t where
    only the repeats' spread is known). `sigma`: one run's standard deviation, as measured."""

    delta: float
    noise: float
    reference: float  # mean(b): what a relative difference is relative to
    sigma: float
    num_a: int
    num_b: int

    @property
    def low(self) -> float:
        return self.delta - self.noise

    @property
    def high(self) -> float:
        return self.delta + self.noise

    @property
    def beyond_noise(self) -> bool:
        """The interval excludes no difference at all."""
        return abs(self.delta) > self.noise

    def relative(self, value: float) -> float | None:
        """`value` (the delta, a bound) as a share of the reference; None for a reference of 0."""
        return value / abs(self.reference) if self.reference else None

    def repeats_needed(self, effect: float) -> int | None:
        """Runs per side for a difference of `effect` to clear the noise at the spread measured
        (NOISE_Z · σ · sqrt(2/n) < |effect|); None when nothing can be said (no effect, no spread)."""
        if not effect or not self.sigma:
            return None
        return max(1, math.ceil(2 * (NOISE_Z * self.sigma / effect) ** 2))


def difference(a: Sequence[Estimate], b: Sequence[Estimate], *, family: int = 1) -> Difference | None:
    """How far the runs `a` are from the runs `b` beyond the noise (the module says how); None
    when a side is empty or nothing measures the noise. `family`: how many such comparisons one
    verdict makes (the release gate compares ~25 metrics), each then at `tail(family)`."""
    if not a or not b:
        return None
    va, vb = np.array([e.value for e in a], dtype=float), np.array([e.value for e in b], dtype=float)
    dof = len(va) + len(vb) - 2
    squares = float(((va - va.mean()) ** 2).sum() + ((vb - vb.mean()) ** 2).sum())
    spread = squares / dof if dof > 0 else None
    sampled = [e.sampling_var for e in (*a, *b) if e.sampling_var is not None]
    sampling = float(np.mean(sampled)) if len(sampled) == len(a) + len(b) else None
    level = _level(sampling, spread, dof, family)
    if level is None:
        return None
    sigma, quantile = level
    noise = quantile * sigma * math.sqrt(1 / len(va) + 1 / len(vb))
    return Difference(float(va.mean() - vb.mean()), noise, float(vb.mean()), sigma, len(va), len(vb))


def _level(sampling: float | None, spread: float | None, dof: int, family: int = 1) -> tuple[float, float] | None:
    """(σ, the quantile it is multiplied by): the sampling noise at the normal quantile, or the
    repeats' spread at Student's t for its degrees of freedom, whichever makes the wider noise;
    None when neither is known (the spread needs MIN_DEGREES_OF_FREEDOM on its own)."""
    levels = []
    if sampling is not None:
        levels.append((math.sqrt(sampling), z_quantile(family)))
    if spread is not None and (sampling is not None or dof >= MIN_DEGREES_OF_FREEDOM):
        levels.append((math.sqrt(spread), t_quantile(dof, family)))
    return max(levels, key=lambda level: level[0] * level[1]) if levels else None


def interval(estimates: Sequence[Estimate]) -> tuple[float, float] | None:
    """One set of runs' interval for its mean, by the rule of `difference` with one side: what a
    reader compares side by side with another config's. None when the noise is unknown."""
    if not estimates:
        return None
    values = np.array([e.value for e in estimates], dtype=float)
    n, mean = len(values), float(values.mean())
    spread = float(values.var(ddof=1)) if n > 1 else None
    sampled = [e.sampling_var for e in estimates if e.sampling_var is not None]
    level = _level(float(np.mean(sampled)) if len(sampled) == n else None, spread, n - 1)
    if level is None:
        return None
    half = level[0] * level[1] / math.sqrt(n)
    return mean - half, mean + half


def normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def tail(family: int = 1) -> float:
    """The one-sided tail each comparison of a family of `family` may leave out: NOISE_Z's,
    shared among them (Bonferroni), so that the family as a whole is wrong once in twenty."""
    return (1.0 - normal_cdf(NOISE_Z)) / family


def z_quantile(family: int = 1) -> float:
    """The normal quantile at `tail(family)`: NOISE_Z for one comparison, 3.08 for 25."""
    return _bisect(lambda z: 1.0 - normal_cdf(z), tail(family))


def t_quantile(dof: int, family: int = 1) -> float:
    """Student's t quantile at `tail(family)` (4.30 for 2 degrees of freedom, 2.23 for 10): closed
    forms for 1 and 2 degrees of freedom, else the density integrated numerically (numpy only)."""
    p = 1.0 - tail(family)
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    log_c = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)

    def upper(x: float) -> float:
        t = np.linspace(0.0, x, 8001)
        density = np.exp(log_c - (dof + 1) / 2 * np.log1p(t * t / dof))
        return 0.5 - float(np.trapezoid(density, t))

    return _bisect(upper, tail(family))


def _bisect(upper_tail: Callable[[float], float], wanted: float) -> float:
    """The x ≥ 0 whose decreasing `upper_tail(x)` is `wanted`."""
    low, high = 0.0, 200.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if upper_tail(mid) > wanted else (low, mid)
    return (low + high) / 2
