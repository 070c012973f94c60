"""What a comparison decides: the best config per metric, and one overall.

Each config's number for a metric is the median over its runs (repeats of one load; P50 by
nearest rank, `record.query.percentile`, as every percentile kvgate shows), shown with
the range (min–max) the repeats spread over. Only candidates decide; baselines are compared and
never chosen.

**Best per metric**: the candidate with the best median in the metric's direction (ties name
every leader; values that print the same are a tie), where at least two candidates have the
number. When the best and the runner-up
each ran more than once and their ranges overlap, the lead is marked `≈`: the repeats do not
separate them.

**Overall**, in two steps:
1. *Eligible*: candidates that passed every gate in every run (a run where no gate could be
   measured does not count as passed).
2. *Ranking*: over the deciding metrics (`Metric.deciding`: goodput in completion tokens/s,
   P95 TTFT of interactive requests, prefix hit ratio, re-prefill tokens, requests without an
   answer) each eligible candidate gets its rank by median (1 = best, ties share the mean
   rank); a metric some eligible candidate has no number for is left out. The lowest mean rank
   wins; a tie goes to the higher goodput, then to the name. One eligible candidate wins alone;
   none eligible means no choice.

    decision = decide_configs(configs)   # = decide(configs, comparison_metrics(their runs))
    decision_lines(decision)             # the same words on the page and in the console
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gates import Outcome
from record.query import percentile
from reports.compared import ComparedConfig
from reports.metrics import TIE_BREAK, Better, Metric, comparison_metrics


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

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high


def spread(config: ComparedConfig, metric: Metric) -> Spread | None:
    values = [v for v in (metric.value(run) for run in config.runs) if v is not None]
    if not values:
        return None
    return Spread(percentile(values, 50), min(values), max(values), len(values))


@dataclass(frozen=True)
class Best:
    metric: Metric
    leaders: tuple[ComparedConfig, ...]
    value: Spread
    runner_up: ComparedConfig | None
    within_spread: bool  # best and runner-up repeated and their ranges overlap

    def text(self) -> str:
        names = " = ".join(c.name for c in self.leaders)
        close = f", ≈ {self.runner_up.name} (ranges overlap)" if self.within_spread and self.runner_up else ""
        return f"{names} {self.value.text(self.metric)}{close}"


def best_of(configs: Sequence[ComparedConfig], metric: Metric) -> Best | None:
    """The best candidate for a ranked metric; None for an unranked one, or when fewer than two
    candidates have it (one alone is not a comparison)."""
    if metric.better is None:
        return None
    known = [(c, s) for c in configs if not c.baseline and (s := spread(c, metric)) is not None]
    if len(known) < 2:
        return None
    known.sort(key=lambda cs: _sort_key(metric, cs[1].median))
    top = known[0][1].median
    leaders = tuple(c for c, s in known if _equal(metric, s.median, top))
    rest = [(c, s) for c, s in known if not _equal(metric, s.median, top)]
    runner_up, runner_spread = rest[0] if rest else (None, None)
    close = (
        runner_spread is not None
        and known[0][1].num_runs > 1
        and runner_spread.num_runs > 1
        and known[0][1].overlaps(runner_spread)
    )
    return Best(metric, leaders, known[0][1], runner_up, close)


@dataclass(frozen=True)
class Decision:
    choice: ComparedConfig | None
    ranking: tuple[tuple[ComparedConfig, float], ...]  # eligible candidates, best mean rank first
    deciding: tuple[Metric, ...]  # the metrics the ranking used
    not_eligible: tuple[tuple[ComparedConfig, str], ...]  # candidates, and why
    baselines: tuple[ComparedConfig, ...]
    best: tuple[Best, ...]  # every ranked metric at least two candidates have


def decide(configs: Sequence[ComparedConfig], metrics: Sequence[Metric]) -> Decision:
    candidates = [c for c in configs if not c.baseline]
    eligible = [c for c in candidates if c.passed_every_gate]
    deciding = tuple(m for m in metrics if m.deciding and eligible and all(spread(c, m) is not None for c in eligible))
    ranks = {c.name: 0.0 for c in eligible}
    for metric in deciding:
        for name, rank in _ranks(eligible, metric).items():
            ranks[name] += rank / len(deciding)
    tie = next((m for m in deciding if m.key == TIE_BREAK), None)
    ranking = sorted(eligible, key=lambda c: (ranks[c.name], _tie_key(c, tie), c.name))
    best = tuple(b for m in metrics if (b := best_of(configs, m)) is not None)
    return Decision(
        choice=ranking[0] if ranking else None,
        ranking=tuple((c, ranks[c.name]) for c in ranking),
        deciding=deciding,
        not_eligible=tuple((c, _why_not(c)) for c in candidates if c not in eligible),
        baselines=tuple(c for c in configs if c.baseline),
        best=best,
    )


def decide_configs(configs: Sequence[ComparedConfig]) -> Decision:
    """The decision over every row of the comparison."""
    return decide(configs, comparison_metrics([run for c in configs for run in c.runs]))


def decision_lines(decision: Decision) -> list[str]:
    """The decision in plain lines: overall, ranking, who could not be chosen and why, the best
    per deciding metric."""
    lines = [_overall(decision)]
    if len(decision.ranking) > 1:
        lines.append("ranking (mean rank): " + " · ".join(f"{c.name} {r:.1f}" for c, r in decision.ranking))
    if decision.not_eligible:
        lines.append("not eligible: " + "; ".join(f"{c.name} ({why})" for c, why in decision.not_eligible))
    if decision.baselines:
        lines.append("baselines (compared, never chosen): " + ", ".join(c.name for c in decision.baselines))
    lines += [f"best {b.metric.label}: {b.text()}" for b in decision.best if b.metric.deciding]
    return lines


def _overall(decision: Decision) -> str:
    choice = decision.choice
    if choice is None:
        return "overall: no choice: no candidate passed every gate in every run"
    runs = f"passed every gate in {len(choice.runs)} of {len(choice.runs)} runs"
    if len(decision.ranking) == 1:
        return f"overall: {choice.name} ({runs}; the only candidate that did)"
    if not decision.deciding:
        return f"overall: {choice.name} ({runs}; no deciding metric is known for every eligible candidate)"
    over = ", ".join(m.label for m in decision.deciding)
    return (
        f"overall: {choice.name} ({runs}; mean rank {decision.ranking[0][1]:.1f} among "
        f"{len(decision.ranking)} eligible candidates over {over})"
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
