"""The release gate: one run against stored runs of the last good build, beyond noise and budget.

    verdict = judge_regressions(candidate, baselines, budgets)   # each: {metric key: (Metric, Estimate)}
    verdict.regressions                  # the metrics worse beyond both the noise and the budget
    verdict.write(run_dir)               # regression.json

A metric *regresses* when the candidate is worse than the baselines' mean beyond the noise
(gates/noise.py: the interval of the difference lies wholly on the worse side) and by more than
its budget (gates/budgets.py). The ~25 metrics of one verdict share the one 5 % chance of a
false alarm (each is judged at 5 %/25: Bonferroni), since a verdict with any regression fails.
Otherwise a metric is *within the noise*, *within the budget*, *better* (beyond the noise the
other way), or *not judged* when the noise cannot be known (a metric with
no per-request samples needs three baseline runs: the spread of their values is its only noise).

Runs are comparable only under the same load on the same kind of target: `differences` names
every fact of the records that differs (scenario set, profile, model, the GPU the pool was sized
for, target kind, the open-loop rate, arrivals, seed or trace, the duration of the load, the
fleet's replica count), and a candidate compared across any of them is not judged at all. The
pool's size in blocks is not one of them: on the same GPU and model it is what the build under
test made of the memory (a config's `kv_pool_gib`, vLLM's `--num-gpu-blocks-override`), so a
smaller pool is gated by what it costs (preemptions, hit ratio, TTFT) and named in `notes`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from gates.base import Unit, format_value
from gates.budgets import Budget, Worse
from gates.noise import Difference, Estimate, difference
from record.run_record import RunMeta

REGRESSION_FILE = "regression.json"


@dataclass(frozen=True)
class RegressionMetric:
    """A metric the release gate compares: `key` names it in a run (`ttft_p95.interactive`),
    `budget_key` its `[regression]` budget (`ttft_p95`)."""

    key: str
    budget_key: str
    label: str
    unit: Unit
    worse: Worse

    def fmt(self, value: float) -> str:
        return format_value(value, self.unit)


Measured = Mapping[str, tuple[RegressionMetric, Estimate]]
"""One run's metrics, by key: what reports/regression_metrics.py reads from a record."""


class Status(str, Enum):
    REGRESSED = "regressed"
    WITHIN_BUDGET = "worse beyond the noise, within the budget"
    WITHIN_NOISE = "within the noise"
    BETTER = "better beyond the noise"
    NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class MetricComparison:
    metric: RegressionMetric
    candidate: float
    baselines: tuple[float, ...]
    difference: Difference | None  # candidate - the baselines' mean; None: the noise is unknown
    budget: Budget

    @property
    def status(self) -> Status:
        d = self.difference
        if d is None:
            return Status.NOT_JUDGED
        if not d.beyond_noise:
            return Status.WITHIN_NOISE
        worse_by = d.delta if self.metric.worse is Worse.HIGHER else -d.delta
        if worse_by < 0:
            return Status.BETTER
        return Status.REGRESSED if self.budget.exceeded_by(worse_by, d.reference) else Status.WITHIN_BUDGET

    def delta_text(self) -> str:
        """`+12.3% [+4.1%, +20.5%]` (relative where the baselines' mean is not 0), else in the unit."""
        d = self.difference
        if d is None:
            return f"noise unknown: needs {MIN_BASELINES} baseline runs"
        if d.reference:
            delta, low, high = (f"{v / abs(d.reference):+.1%}" for v in (d.delta, d.low, d.high))
        else:
            delta, low, high = (_signed(self.metric, v) for v in (d.delta, d.low, d.high))
        return f"{delta} [{low}, {high}]"

    def text(self) -> str:
        base = ", ".join(self.metric.fmt(v) for v in self.baselines)
        return (
            f"{self.metric.label}: {self.metric.fmt(self.candidate)} against {base} — {self.delta_text()}, "
            f"budget {self.budget.text}: {self.status.value}"
        )

    def as_dict(self) -> dict[str, Any]:
        d = self.difference
        return {
            "metric": self.metric.key,
            "label": self.metric.label,
            "unit": self.metric.unit.value,
            "worse": self.metric.worse.value,
            "candidate": self.candidate,
            "baselines": list(self.baselines),
            "delta": None if d is None else d.delta,
            "low": None if d is None else d.low,
            "high": None if d is None else d.high,
            "relative_delta": None if d is None else d.relative(d.delta),
            "budget": self.budget.text,
            "status": self.status.value,
        }


MIN_BASELINES = 3  # per-run values only: the spread of three runs is the least that says anything


def _signed(metric: RegressionMetric, value: float) -> str:
    return ("+" if value >= 0 else "-") + metric.fmt(abs(value))


@dataclass(frozen=True)
class RegressionVerdict:
    run_id: str
    baselines: tuple[str, ...]  # the baseline runs' directories
    comparisons: tuple[MetricComparison, ...]
    differences: tuple[str, ...] = ()  # what makes the runs not comparable; then nothing is judged
    notes: tuple[str, ...] = ()  # what differs and is judged by its effects (the pool's size)

    @property
    def comparable(self) -> bool:
        return not self.differences

    @property
    def regressions(self) -> tuple[MetricComparison, ...]:
        return tuple(c for c in self.comparisons if c.status is Status.REGRESSED)

    def summary(self) -> str:
        if not self.comparable:
            return f"not comparable with the baselines: {'; '.join(self.differences)}"
        judged = sum(c.status is not Status.NOT_JUDGED for c in self.comparisons)
        notes = "".join(f"; {n}" for n in self.notes)
        if self.regressions:
            names = ", ".join(c.metric.label for c in self.regressions)
            return f"{len(self.regressions)} regression(s) against {len(self.baselines)} baseline runs: {names}{notes}"
        return f"no regression against {len(self.baselines)} baseline runs ({judged} metrics judged){notes}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "baselines": list(self.baselines),
            "comparable": self.comparable,
            "differences": list(self.differences),
            "notes": list(self.notes),
            "regressions": [c.metric.key for c in self.regressions],
            "summary": self.summary(),
            "metrics": [c.as_dict() for c in self.comparisons],
        }

    def write(self, run_dir: Path) -> Path:
        path = Path(run_dir) / REGRESSION_FILE
        path.write_text(json.dumps(self.as_dict(), indent=2))
        return path


def judge_regressions(
    run_id: str,
    candidate: Measured,
    baselines: Mapping[str, Measured],
    budgets: Mapping[str, Budget],
    notes: Sequence[str] = (),
) -> RegressionVerdict:
    """Every metric the candidate and at least one baseline run measured, compared; `baselines`
    by their directories."""
    comparisons = []
    compared = [key for key in candidate if any(key in m for m in baselines.values())]
    for key in compared:
        metric, estimate = candidate[key]
        stored = [m[key][1] for m in baselines.values() if key in m]
        d = difference([estimate], stored, family=len(compared))
        if d is not None and estimate.sampling_var is None and len(stored) < MIN_BASELINES:
            d = None
        budget = budgets[metric.budget_key]
        comparisons.append(MetricComparison(metric, estimate.value, tuple(e.value for e in stored), d, budget))
    return RegressionVerdict(run_id, tuple(baselines), tuple(comparisons), notes=tuple(notes))


def not_comparable(run_id: str, baselines: Sequence[str], differences: Sequence[str]) -> RegressionVerdict:
    return RegressionVerdict(run_id, tuple(baselines), (), tuple(differences))


def differences(candidate: RunMeta, baselines: Sequence[RunMeta]) -> list[str]:
    """What differs between the candidate's load and target and a baseline's: each fact once,
    with the candidate's value and the baselines' values."""
    return _differing(_FACTS, candidate, baselines)


def pool_notes(candidate: RunMeta, baselines: Sequence[RunMeta]) -> list[str]:
    """The pool's size, where it differs: judged by its effects, said beside them."""
    return _differing({"pool size (blocks)": _pool_blocks}, candidate, baselines)


def _pool_blocks(meta: RunMeta) -> int | None:
    """The configured pool, else what an external target reported (vLLM's num_gpu_blocks)."""
    if meta.pool is not None:
        return meta.pool.num_blocks
    blocks = meta.final.get("num_blocks", meta.initial.get("num_blocks"))
    return None if blocks is None else int(blocks)


def _differing(
    facts: Mapping[str, Callable[[RunMeta], Any]], candidate: RunMeta, baselines: Sequence[RunMeta]
) -> list[str]:
    found = []
    for name, read in facts.items():
        mine = read(candidate)
        theirs = sorted({repr(read(b)) for b in baselines} - {repr(mine)})
        if theirs:
            found.append(f"{name} {mine!r} here, {', '.join(theirs)} in the baselines")
    return found


def _live(meta: RunMeta, *keys: str) -> Any:
    value: Any = getattr(meta, "live", None) or {}
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


_FACTS: dict[str, Callable[[RunMeta], Any]] = {
    "mode": lambda m: m.mode,
    "scenario set": lambda m: sorted(m.scenarios),
    "profile": lambda m: _live(m, "profile"),
    "model": lambda m: m.pool.model if m.pool is not None else m.target.get("model"),
    "GPU": lambda m: m.pool.gpu if m.pool is not None else None,
    "target kind": lambda m: m.target.get("kind"),
    "load duration (s)": lambda m: _live(m, "duration_s"),
    "open-loop rate": lambda m: _live(m, "settings", "rate"),
    "arrivals": lambda m: _live(m, "settings", "arrivals"),
    "arrival seed": lambda m: _live(m, "settings", "arrival_seed"),
    "trace": lambda m: _live(m, "settings", "trace"),
    "replica count": lambda m: len(m.target.get("replicas") or []) or m.target.get("workers") or 0,
}
