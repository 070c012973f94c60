"""Gate thresholds: the packaged defaults (`thresholds.toml`) overlaid by a user file.

Every table must name a registered gate, or be `[slo]` (the objective several gates share,
gates/slo.py), or `[regression]` (the budgets of the release gate, gates/budgets.py, whose values
are strings such as "+10%"), and every key one of that table's metrics; anything else is an error that lists
the valid names, because a typo that silently kept a default would turn a gate the user meant to
tighten into one that passes. Values must be numbers. A gate's limits are its own table plus the
`[slo]` keys as `slo.<key>`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from gates import budgets, slo
from gates.base import Limits
from gates.budgets import Budget
from gates.registry import GATES, get_gate
from record.errors import ConfigError, UnknownNameError

DEFAULT_THRESHOLDS = Path(__file__).with_name("thresholds.toml")


@dataclass(frozen=True)
class Thresholds:
    """Limits per table (every registered gate, and `slo`), complete; `source` says where they
    came from."""

    limits: Mapping[str, Limits]
    source: str
    budgets: Mapping[str, Budget]  # `[regression]`, complete: every key of gates/budgets.py

    def for_gate(self, name: str) -> Limits:
        """The gate's own limits and the shared objective, as `slo.<key>`."""
        get_gate(name)
        shared = {f"{slo.TABLE}.{key}": value for key, value in self.limits[slo.TABLE].items()}
        return MappingProxyType({**self.limits[name], **shared})

    @property
    def objective(self) -> Limits:
        """The shared objective, the `[slo]` table (gates/slo.py), for figures outside the gates."""
        return self.limits[slo.TABLE]


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """The defaults, with `path` (if given) overriding them key by key."""
    tables, budget_table = _read(DEFAULT_THRESHOLDS)
    limits = {name: dict(table) for name, table in tables.items()}
    regression = dict(budget_table)
    assert set(regression) == set(budgets.BUDGET_KEYS), f"{DEFAULT_THRESHOLDS} lacks [{budgets.TABLE}] budgets"
    expected = {slo.TABLE: slo.METRICS, **{g: gate.metrics for g, gate in GATES.items()}}
    missing = [f"{t}.{m}" for t, metrics in expected.items() for m in metrics if m not in limits.get(t, {})]
    assert not missing, f"{DEFAULT_THRESHOLDS} lacks defaults for {missing}"
    source = str(DEFAULT_THRESHOLDS)
    if path is not None:
        tables, budget_table = _read(Path(path))
        for name, table in tables.items():
            limits[name].update(table)
        regression.update(budget_table)
        source = str(path)
    return Thresholds(
        {name: MappingProxyType(table) for name, table in limits.items()}, source, MappingProxyType(regression)
    )


def _metrics_of(name: str) -> Mapping[str, str]:
    """The metrics a table may set: the shared objective's, or its gate's (unknown: an error
    that lists every table)."""
    if name == slo.TABLE:
        return slo.METRICS
    if name not in GATES:
        raise UnknownNameError("gate", name, [*GATES, slo.TABLE, budgets.TABLE])
    return get_gate(name).metrics


def _read(path: Path) -> tuple[dict[str, dict[str, float]], dict[str, Budget]]:
    """The gates' tables and `[regression]`'s budgets of one file."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: thresholds file not found") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    tables: dict[str, dict[str, float]] = {}
    regression: dict[str, Budget] = {}
    for name, table in raw.items():
        if name == budgets.TABLE:
            if not isinstance(table, dict):
                raise ConfigError(f'{path}: [{name}] must be a table of metric = "budget"')
            regression = budgets.parse_budgets(table)
            continue
        metrics = _metrics_of(name)
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{name}] must be a table of metric = number")
        for metric, value in table.items():
            if metric not in metrics:
                kind = "shared objective [slo]" if name == slo.TABLE else f"gate {name!r}"
                raise UnknownNameError(f"metric of {kind}", metric, metrics)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{path}: {name}.{metric} = {value!r} must be a number")
        tables[name] = {metric: float(value) for metric, value in table.items()}
    return tables, regression
