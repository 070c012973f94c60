"""What a comparison decides: the best config per metric, and one overall, only beyond the noise.

Each config's number for a metric is the median over its runs (repeats of one load; P50 by
nearest rank, `record.query.percentile`, as every percentile kvgate shows), shown with the range
(min–max) the repeats spread over. Only candidates decide; baselines are compared and never
chosen. Whether two configs differ is asked of gates/noise.py, the model the release gate uses
too: the difference of their runs' means against the noise of per-request samples (TTFT and
prefix hits by request, served tokens and refusals as counts: `Metric.estimate`) and of the
repeats' own spread. A single run per config is one sample: metrics without per-request samples
then cannot tell any two configs apart.

**Best per metric**: the candidate with the best median in the metric's direction, where at
least two candidates have the number, and with it every candidate whose difference from it is
within the noise (or whose noise is unknown): "no difference beyond noise" names them all.

**Overall**, in two steps:
1. *Eligible*: candidates that passed every gate in every run (a run where no gate could be
   measured does not count as passed).
2. *Winner*: over the deciding metrics (`Metric.deciding`: goodput in completion tokens/s, P95
   TTFT of interactive requests, prefix hit ratio, re-prefill tokens, requests without an
   answer; a metric some eligible candidate has no number for is left out), A beats B when A is
   better beyond the noise on more of them than B is on A. The winner beats every other
   eligible candidate; without one there is "no overall winner at this load and repeat count",
   and what keeps the leader by rank from winning: the first candidate it does not beat, a
   trade-off between them (each better beyond the noise on some metric), and the repeats per
   config the measured noise says would tell them apart where neither is ahead yet. One eligible
   candidate wins alone (the gates decided); none eligible means no choice. The ranking by mean
   rank of the medians is still shown, as what it is: an order, not a decision.

    decision = decide_configs(configs)   # = decide(configs, comparison_metrics(their runs))
    decision_lines(decision)             # the same words on the page and in the console
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gates import Outcome
from gates.noise import Difference, Estimate, difference, interval
from record.query import percentile
from reports.compared import ComparedConfig
from reports.metrics import TIE_BREAK, Better, Metric, comparison_metrics

MAX_REPEATS_ADVISED = 30  # beyond this, a longer load or another profile tells more than repeats


@dataclass(frozen=True)
class Spread:
    """A config's number for one metric over its runs that had one."""

    median: float
    low: float
    high: float
    num_runs: int

    def text(self, metric: Metric) -> str:
        """The median, and the range when it shows at the metric's precision."""
        low, high = metric.fmt(self.low), metric.fmt(self.high)
        return metric.fmt(self.median) if low == high else f"{metric.fmt(self.median)} ({low}–{high})"


def spread(config: ComparedConfig, metric: Metric) -> Spread | None:
    values = [v for v in (metric.value(run) for run in config.runs) if v is not None]
    if not values:
        return None
    return Spread(percentile(values, 50), min(values), max(values), len(values))


class Noise:
    """Each config's runs as estimates of each metric, computed once (a bootstrap is not free),
    and the differences between configs that gates/noise.py finds in them."""

    def __init__(self) -> None:
        self._estimates: dict[tuple[int, str], list[Estimate]] = {}

    def estimates(self, config: ComparedConfig, metric: Metric) -> list[Estimate]:
        key = (id(config), metric.key)
        if key not in self._estimates:
            self._estimates[key] = [e for run in config.runs if (e := metric.estimate_of(run)) is not None]
        return self._estimates[key]

    def difference(self, a: ComparedConfig, b: ComparedConfig, metric: Metric) -> Difference | None:
        return difference(self.estimates(a, metric), self.estimates(b, metric))

    def better(self, a: ComparedConfig, b: ComparedConfig, metric: Metric) -> bool:
        """`a` is better than `b` on `metric` beyond the noise."""
        d = self.difference(a, b, metric)
        if d is None or not d.beyond_noise:
            return False
        return d.delta > 0 if metric.better is Better.HIGHER else d.delta < 0

    def interval(self, config: ComparedConfig, metric: Metric) -> tuple[float, float] | None:
        return interval(self.estimates(config, metric))


@dataclass(frozen=True)
class Best:
    metric: Metric
    leaders: tuple[ComparedConfig, ...]  # the best median, and every candidate within the noise of it
    value: Spread  # the best median's
    beaten: tuple[ComparedConfig, ...]  # candidates the leaders are better than beyond the noise

    def text(self) -> str:
        best = f"{self.leaders[0].name} {self.value.text(self.metric)}"
        if not self.beaten:
            return f"no difference beyond noise ({' = '.join(c.name for c in self.leaders)}; best median {best})"
        ties = "".join(f" = {c.name}" for c in self.leaders[1:])
        if not ties:
            return f"{best}, beyond noise"
        beaten = ", ".join(c.name for c in self.beaten)
        return f"{best}{ties} (no difference beyond noise between them; better beyond noise than {beaten})"


def best_of(configs: Sequence[ComparedConfig], metric: Metric, noise: Noise | None = None) -> Best | None:
    """The best candidate for a ranked metric and those within the noise of it; None for an
    unranked metric, or when fewer than two candidates have it (one alone is not a comparison)."""
    if metric.better is None:
        return None
    noise = noise or Noise()
    known = [(c, s) for c in configs if not c.baseline and (s := spread(c, metric)) is not None]
    if len(known) < 2:
        return None
    known.sort(key=lambda cs: _sort_key(metric, cs[1].median))
    top = known[0][0]
    leaders = tuple(c for c, s in known if c is top or not noise.better(top, c, metric))
    beaten = tuple(c for c, _ in known if c not in leaders)
    return Best(metric, leaders, known[0][1], beaten)


@dataclass(frozen=True)
class Decision:
    choice: ComparedConfig | None  # the winner beyond the noise, the only eligible candidate, or None
    ranking: tuple[tuple[ComparedConfig, float], ...]  # eligible candidates by mean rank of medians
    deciding: tuple[Metric, ...]  # the metrics the ranking and the winner used
    not_eligible: tuple[tuple[ComparedConfig, str], ...]  # candidates, and why
    baselines: tuple[ComparedConfig, ...]
    best: tuple[Best, ...]  # every ranked metric at least two candidates have
    num_repeats: int  # the fewest runs of an eligible candidate
    advice: str  # without a winner among several: what would tell them apart
    noise: Noise  # the estimates it decided on, for the page's intervals


def decide(configs: Sequence[ComparedConfig], metrics: Sequence[Metric]) -> Decision:
    noise = Noise()
    candidates = [c for c in configs if not c.baseline]
    eligible = [c for c in candidates if c.passed_every_gate]
    deciding = tuple(m for m in metrics if m.deciding and eligible and all(spread(c, m) is not None for c in eligible))
    ranks = {c.name: 0.0 for c in eligible}
    for metric in deciding:
        for name, rank in _ranks(eligible, metric).items():
            ranks[name] += rank / len(deciding)
    tie = next((m for m in deciding if m.key == TIE_BREAK), None)
    ranking = sorted(eligible, key=lambda c: (ranks[c.name], _tie_key(c, tie), c.name))
    choice = ranking[0] if len(ranking) == 1 else _winner(ranking, deciding, noise)
    advice = "" if choice is not None or len(ranking) < 2 else _advice(ranking, deciding, noise)
    return Decision(
        choice=choice,
        ranking=tuple((c, ranks[c.name]) for c in ranking),
        deciding=deciding,
        not_eligible=tuple((c, _why_not(c)) for c in candidates if c not in eligible),
        baselines=tuple(c for c in configs if c.baseline),
        best=tuple(b for m in metrics if (b := best_of(configs, m, noise)) is not None),
        num_repeats=min((len(c.runs) for c in eligible), default=0),
        advice=advice,
        noise=noise,
    )


def _wins(a: ComparedConfig, b: ComparedConfig, deciding: Sequence[Metric], noise: Noise) -> int:
    """On how many deciding metrics `a` is better than `b` beyond the noise."""
    return sum(noise.better(a, b, m) for m in deciding)


def _beats(a: ComparedConfig, b: ComparedConfig, deciding: Sequence[Metric], noise: Noise) -> bool:
    return _wins(a, b, deciding, noise) > _wins(b, a, deciding, noise)


def _winner(ranking: Sequence[ComparedConfig], deciding: Sequence[Metric], noise: Noise) -> ComparedConfig | None:
    """The eligible candidate that beats every other one beyond the noise (module docstring)."""
    return next((a for a in ranking if all(_beats(a, b, deciding, noise) for b in ranking if b is not a)), None)


def _advice(ranking: Sequence[ComparedConfig], deciding: Sequence[Metric], noise: Noise) -> str:
    """What keeps the leader by rank from winning: the first candidate it does not beat. Where
    each of the two is already better beyond the noise on some metric, that is a trade-off that
    repeats do not settle; on metrics where neither is, how many repeats per config the measured
    noise says a difference of the size the medians show needs (always more than they ran)."""
    first = ranking[0]
    rival = next(b for b in ranking[1:] if not _beats(first, b, deciding, noise))
    ahead = {
        c.name: [m.label for m in deciding if noise.better(c, other, m)]
        for c, other in ((first, rival), (rival, first))
    }
    ran = min(len(first.runs), len(rival.runs))
    needed = []
    for metric in deciding:
        d = noise.difference(first, rival, metric)
        if d is not None and not d.beyond_noise and (n := d.repeats_needed(d.delta)) is not None:
            needed.append((max(n, ran + 1), metric))
    trade_off = (
        f"{first.name} and {rival.name} trade off beyond the noise ({first.name} better on "
        f"{', '.join(ahead[first.name])}; {rival.name} on {', '.join(ahead[rival.name])}): repeats do not settle that"
        if ahead[first.name] and ahead[rival.name]
        else ""
    )
    if not needed:
        unmeasured = "the runs cannot measure their own noise on any deciding metric: run with --repeat 3 or more"
        return trade_off or unmeasured
    n, metric = min(needed, key=lambda nm: nm[0])
    if n > MAX_REPEATS_ADVISED:
        repeats = (
            f"{first.name} and {rival.name} differ by less than their noise: even on {metric.label}, more than "
            f"{MAX_REPEATS_ADVISED} repeats per config would be needed; a longer load (the ci profile) tells more"
        )
    else:
        caveat = (
            " (from the noise of one run's requests: the spread of repeats, unknown from one run each, is often wider)"
            if ran == 1
            else ""
        )
        repeats = (
            f"about {n} repeats per config (--repeat {n}) would tell {first.name} from {rival.name} on "
            f"{metric.label}, if the difference the medians show holds{caveat}"
        )
    return f"{trade_off}; {repeats}" if trade_off else repeats


def decide_configs(configs: Sequence[ComparedConfig]) -> Decision:
    """The decision over every row of the comparison."""
    return decide(configs, comparison_metrics([run for c in configs for run in c.runs]))


def decision_lines(decision: Decision) -> list[str]:
    """The decision in plain lines: overall, what one sample means, the ranking, who could not be
    chosen and why, the best per deciding metric."""
    lines = [_overall(decision)]
    if decision.num_repeats == 1 and len(decision.ranking) > 1:
        lines.append(
            "one run per config: the ranking is one sample of each; differences are tested on the requests "
            "of each run where they allow it (TTFT, prefix hits, served tokens, refusals), others need --repeat 3"
        )
    if len(decision.ranking) > 1:
        order = " · ".join(f"{c.name} {r:.1f}" for c, r in decision.ranking)
        lines.append(f"ranking by medians (mean rank; an order, not a decision): {order}")
    if decision.not_eligible:
        lines.append("not eligible: " + "; ".join(f"{c.name} ({why})" for c, why in decision.not_eligible))
    if decision.baselines:
        lines.append("baselines (compared, never chosen): " + ", ".join(c.name for c in decision.baselines))
    lines += [f"best {b.metric.label}: {b.text()}" for b in decision.best if b.metric.deciding]
    return lines


def _overall(decision: Decision) -> str:
    choice = decision.choice
    if not decision.ranking:
        return "overall: no choice: no candidate passed every gate in every run"
    if choice is None:
        repeats = f"{decision.num_repeats} run{'s' if decision.num_repeats > 1 else ''} per config"
        return f"overall: no overall winner at this load and repeat count ({repeats}): {decision.advice}"
    runs = f"passed every gate in {len(choice.runs)} of {len(choice.runs)} runs"
    if len(decision.ranking) == 1:
        return f"overall: {choice.name} ({runs}; the only candidate that did)"
    over = ", ".join(m.label for m in decision.deciding)
    return (
        f"overall: {choice.name} ({runs}; better beyond noise than each of the other "
        f"{len(decision.ranking) - 1} eligible candidates on more of {over} than they are on it)"
    )


def _ranks(configs: Sequence[ComparedConfig], metric: Metric) -> dict[str, float]:
    """1 = best by median; equal medians share the mean of their ranks."""
    medians = {c.name: spread(c, metric).median for c in configs}  # type: ignore[union-attr]
    ordered = sorted(medians.values(), key=lambda v: _sort_key(metric, v))
    return {
        name: statistics.mean(i for i, v in enumerate(ordered, 1) if _equal(metric, v, m))
        for name, m in medians.items()
    }


def _equal(metric: Metric, a: float, b: float) -> bool:
    """Values that print the same are a tie: a lead in a digit the page does not show is noise."""
    return a == b or metric.fmt(a) == metric.fmt(b)


def _tie_key(config: ComparedConfig, tie: Metric | None) -> float:
    """Better goodput first; every eligible config has a number for a deciding metric."""
    s = None if tie is None else spread(config, tie)
    return 0.0 if tie is None or s is None else _sort_key(tie, s.median)


def _sort_key(metric: Metric, value: float) -> float:
    return -value if metric.better is Better.HIGHER else value


def _why_not(config: ComparedConfig) -> str:
    """The gates a candidate failed, with in how many of its runs; or that nothing was measurable."""
    n = len(config.runs)
    failed = Counter(r.gate for run in config.runs for r in run.verdict.results if r.outcome is Outcome.FAIL)
    by_runs = sorted({k for k in failed.values()}, reverse=True)
    parts = [f"failed {', '.join(sorted(g for g, m in failed.items() if m == k))} in {k} of {n} runs" for k in by_runs]
    if unmeasured := config.num_runs(Outcome.NOT_MEASURABLE):
        parts.append(f"no gate measurable in {unmeasured} of {n} runs")
    return "; ".join(parts)
