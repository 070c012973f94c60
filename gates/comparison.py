"""Rules over several judged runs of one load, which no single run's gates can apply.

    shortfalls = goodput_shortfalls(candidate_verdicts, baseline_verdicts)

`goodput_shortfalls`: no candidate may serve less of the offered chat work in time than the best
baseline did (`goodput`'s measured value, gates/checks/goodput.py). A policy that loses to
`vllm_like` or `none` on goodput is no improvement, however its other gates read, so
`kvgate matrix` fails when this list is not empty. A run whose goodput was not measured is left
out; with no baseline measured, nothing can be short of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gates.base import Outcome
from gates.checks.goodput import METRIC, GoodputGate
from gates.verdict import Verdict

_EPS = 1e-9  # the same float noise a measurement on its limit is allowed (gates/base.py)


@dataclass(frozen=True)
class GoodputShortfall:
    """A candidate run whose goodput is below the best baseline run's."""

    run_id: str
    policy: str
    goodput: float
    baseline_run_id: str
    baseline_policy: str
    baseline_goodput: float

    def explanation(self) -> str:
        return (f"{self.policy} ({self.run_id}) served {self.goodput:.1%} of the offered critical chat in time, "
                f"below the baseline {self.baseline_policy} ({self.baseline_run_id}): {self.baseline_goodput:.1%}")


def measured_goodput(verdict: Verdict) -> float | None:
    """The goodput a verdict measured, or None (not run, not measurable)."""
    result = verdict.result(GoodputGate.name)
    if result is None or result.outcome is Outcome.NOT_MEASURABLE:
        return None
    return next((m.value for m in result.measurements if m.metric == METRIC), None)


def goodput_shortfalls(candidates: Sequence[Verdict], baselines: Sequence[Verdict]) -> list[GoodputShortfall]:
    """Every candidate whose goodput is below the best baseline's (none without a measured baseline)."""
    measured = [(v, g) for v in baselines if (g := measured_goodput(v)) is not None]
    if not measured:
        return []
    best, best_goodput = max(measured, key=lambda pair: pair[1])
    return [GoodputShortfall(v.run_id, v.policy, g, best.run_id, best.policy, best_goodput)
            for v in candidates if (g := measured_goodput(v)) is not None and g < best_goodput - _EPS]
