"""Gate thresholds: the packaged defaults (`thresholds.toml`, DESIGN §6) overlaid by a user file.

Every table must name a registered gate and every key one of that gate's metrics; anything else
is an error that lists the valid names, because a typo that silently kept a default would turn a
gate the user meant to tighten into one that passes. Values must be numbers.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from gates.base import Limits
from gates.registry import GATES, get_gate
from reference_engine.errors import ConfigError, UnknownNameError

DEFAULT_THRESHOLDS = Path(__file__).with_name("thresholds.toml")


@dataclass(frozen=True)
class Thresholds:
    """Limits per gate, complete for every registered gate; `source` says where they came from."""

    limits: Mapping[str, Limits]
    source: str

    def for_gate(self, name: str) -> Limits:
        get_gate(name)
        return self.limits[name]


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """The defaults, with `path` (if given) overriding them key by key."""
    limits = {name: dict(table) for name, table in _read(DEFAULT_THRESHOLDS).items()}
    missing = [f"{g}.{m}" for g, gate in GATES.items() for m in gate.metrics if m not in limits.get(g, {})]
    assert not missing, f"{DEFAULT_THRESHOLDS} lacks defaults for {missing}"
    source = str(DEFAULT_THRESHOLDS)
    if path is not None:
        for name, table in _read(Path(path)).items():
            limits[name].update(table)
        source = str(path)
    return Thresholds({name: MappingProxyType(table) for name, table in limits.items()}, source)


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: thresholds file not found") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    tables: dict[str, dict[str, float]] = {}
    for name, table in raw.items():
        gate = get_gate(name)
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{name}] must be a table of metric = number")
        for metric, value in table.items():
            if metric not in gate.metrics:
                raise UnknownNameError(f"metric of gate {name!r}", metric, gate.metrics)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{path}: {name}.{metric} = {value!r} must be a number")
        tables[name] = {metric: float(value) for metric, value in table.items()}
    return tables
