"""The gate contract: a `Gate` reads a run record and returns a `GateResult`.

A gate is a pure function of a run record and its limits (one table of `thresholds.toml`). It
never passes for lack of data: when the signal it needs is absent it says `not_measurable` and
why. A result keeps every `Measurement` it judged, so a reader sees the value, the limit and the
direction of each check; the first failing one (or the first one, when all pass) is the headline
that tables show.

    GateError (KvgateError)   a gate crashed on a record: a harness error, never a verdict
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

import numpy as np

from gates.sources import Source
from record.errors import KvgateError
from record.run_record import RunRecord

_EPS = 1e-9  # float noise allowed when a value sits exactly on its limit


class GateError(KvgateError):
    """A gate raised while reading a record; the run cannot be judged (exit 2)."""


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    NOT_MEASURABLE = "not_measurable"

    @property
    def label(self) -> str:
        """How a person reads it: PASS, FAIL, NOT MEASURABLE (console table, report badges)."""
        return self.value.upper().replace("_", " ")


class Unit(str, Enum):
    """How a measured value is shown; values are stored in these units."""

    SECONDS = "s"
    MILLISECONDS = "ms"
    FRACTION = "fraction"  # shown as a percentage
    FRACTION_PER_S = "fraction/s"  # shown as %/s
    RATIO = "ratio"  # shown as N×
    COUNT = "count"
    SCORE = "score"  # a unitless statistic in [0, 1] (an AUC), shown with two decimals


@dataclass(frozen=True)
class Measurement:
    """One judged number: `value` must be at most (`is_max`) or at least `limit`."""

    metric: str
    value: float
    limit: float
    unit: Unit
    is_max: bool = True

    def __post_init__(self) -> None:  # numpy scalars in, plain floats stored
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "limit", float(self.limit))

    @property
    def ok(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value <= self.limit + _EPS if self.is_max else self.value >= self.limit - _EPS

    def value_text(self) -> str:
        return format_value(self.value, self.unit)

    def limit_text(self) -> str:
        return f"{'≤' if self.is_max else '≥'} {format_value(self.limit, self.unit)}"


def format_value(value: float, unit: Unit) -> str:
    """A value as people read it: `812 ms`, `1.25 s`, `18.2%`, `4.0×`, `3`; infinity is `never`."""
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "never" if unit in (Unit.SECONDS, Unit.MILLISECONDS) else "∞"
    if unit is Unit.FRACTION:
        return f"{value * 100:.1f}%"
    if unit is Unit.FRACTION_PER_S:
        return f"{value * 100:.3g}%/s"
    if unit is Unit.RATIO:
        return f"{value:.1f}×"
    if unit is Unit.COUNT:
        return f"{value:g}"
    if unit is Unit.SCORE:
        return f"{value:.2f}"
    if unit is Unit.MILLISECONDS:
        return f"{value:.0f} ms"
    return f"{value:.3g} s"


@dataclass(frozen=True)
class GateResult:
    """What one gate found. `evidence` is plain JSON data (ids, times, counts) for a human."""

    gate: str
    outcome: Outcome
    explanation: str
    measurements: tuple[Measurement, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    """The data it rested on: labels of the sources the gate named (`resting_on`), else of all its
    sources this record had (gates/evaluate.py; gates/sources.py)."""
    applies: bool = True
    """False for a gate that judges a kind of target this run's is not (a fleet's routing on a
    single engine): still not measurable, but left out of the share that makes a verdict partial."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "evidence", to_jsonable(self.evidence))

    @classmethod
    def judged(
        cls, gate: str, measurements: list[Measurement], explanation: str, evidence: dict[str, Any] | None = None
    ) -> GateResult:
        """Pass when every measurement is within its limit, else fail."""
        outcome = Outcome.PASS if all(m.ok for m in measurements) else Outcome.FAIL
        return cls(gate, outcome, explanation, tuple(measurements), evidence or {})

    @classmethod
    def not_measurable(
        cls, gate: str, why: str, evidence: dict[str, Any] | None = None, *, applies: bool = True
    ) -> GateResult:
        return cls(gate, Outcome.NOT_MEASURABLE, why, (), evidence or {}, applies=applies)

    @property
    def headline(self) -> Measurement | None:
        """The measurement tables show: the first failing one, else the first."""
        return next((m for m in self.measurements if not m.ok), self.measurements[0] if self.measurements else None)

    def measured_text(self) -> str:
        return self.headline.value_text() if self.headline else "—"

    def threshold_text(self) -> str:
        return self.headline.limit_text() if self.headline else "—"

    def with_outcome(self, outcome: Outcome, explanation: str) -> GateResult:
        return replace(self, outcome=outcome, explanation=explanation)

    def resting_on(self, *sources: Source) -> GateResult:
        """This result, naming the sources it used: a gate that prefers one source to another."""
        return replace(self, sources=tuple(s.label for s in sources))


Limits = Mapping[str, float]


class Gate(Protocol):
    """A gate: a name, the metrics its thresholds table may set, its sources, and one pure method.

    `metrics` maps each metric name to what it bounds; the thresholds file may set only these.
    `sources` are the record's signals it can read, in the order it prefers them. All four are
    read-only to callers, so a gate may hold them as plain class attributes.
    """

    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def metrics(self) -> Mapping[str, str]: ...

    @property
    def sources(self) -> tuple[Source, ...]: ...

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult: ...


def to_jsonable(value: Any) -> Any:
    """numpy scalars to Python, non-finite floats to strings ('inf'), so evidence dumps as strict JSON."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
