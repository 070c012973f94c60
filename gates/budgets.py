"""Regression budgets: how much worse than the stored baselines a metric may get (`[regression]`).

    [regression]
    ttft_p95 = "+10%"      # 10 % above the baselines' mean is still fine
    goodput = "-5%"        # a share 5 % below theirs (relative: 50 % -> 47.5 %)
    preemptions = "+0"     # absolute, in the metric's unit: any increase counts

A budget is a string: a sign, a number, and `%` for a share of the baselines' mean (none: in the
metric's own unit). The sign is the metric's worse direction (`+` where higher is worse, `-`
where lower is), so a budget reads as what it allows; a sign the other way, an unknown key or a
malformed string is an error naming what is valid, never a silent default. `gate_values` (every
gate's own value that no other key covers) takes no sign: each gate's limit says which way is
worse. A metric regresses only when it is worse than the baselines beyond both the noise
(gates/noise.py) and its budget (gates/regression.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from record.errors import ConfigError, UnknownNameError

TABLE = "regression"


class Worse(Enum):
    HIGHER = "+"
    LOWER = "-"


BUDGET_KEYS: Mapping[str, Worse | None] = {
    "ttft_median": Worse.HIGHER,
    "ttft_p95": Worse.HIGHER,
    "goodput": Worse.LOWER,
    "prefix_hit_ratio": Worse.LOWER,
    "reprefill_tokens": Worse.HIGHER,
    "cancel_release_p99": Worse.HIGHER,
    "preemptions": Worse.HIGHER,
    "peak_usage": Worse.HIGHER,
    "recompute_tax": Worse.HIGHER,
    "rejections": Worse.HIGHER,
    "gate_values": None,
}
"""Each key of `[regression]` and the direction that is worse for it (None: the gate's own)."""

_BUDGET = re.compile(r"^([+-]?)(\d+(?:\.\d+)?)(%?)$")


@dataclass(frozen=True)
class Budget:
    """How far worse a metric may get: `amount` (≥ 0) of the baselines' mean when `relative`,
    else in the metric's unit."""

    amount: float
    relative: bool
    text: str

    def exceeded_by(self, worse_by: float, reference: float) -> bool:
        """Whether a change `worse_by` (> 0: worse) passes the budget; a relative budget of a
        reference 0 allows nothing worse."""
        allowed = self.amount * abs(reference) if self.relative else self.amount
        return worse_by > allowed


def parse_budget(key: str, text: object) -> Budget:
    """One `[regression]` entry; ConfigError (exit 2) for anything else."""
    if key not in BUDGET_KEYS:
        raise UnknownNameError(f"key of [{TABLE}]", key, BUDGET_KEYS)
    worse = BUDGET_KEYS[key]
    match = _BUDGET.match(text.strip()) if isinstance(text, str) else None
    example = '"10%"' if worse is None else f'"{worse.value}10%" or "{worse.value}0"'
    if match is None:
        raise ConfigError(f"[{TABLE}] {key} = {text!r}: a budget is a quoted string such as {example}")
    sign, number, percent = match.groups()
    if worse is None and sign:
        raise ConfigError(f"[{TABLE}] {key} = {text!r}: no sign, each gate's limit says which way is worse")
    if worse is not None and sign != worse.value:
        side = "higher" if worse is Worse.HIGHER else "lower"
        raise ConfigError(f"[{TABLE}] {key} = {text!r}: {side} is worse for {key}, so its budget is {example}")
    return Budget(float(number) / (100 if percent else 1), bool(percent), match.group(0))


def parse_budgets(table: Mapping[str, object]) -> dict[str, Budget]:
    return {key: parse_budget(key, text) for key, text in table.items()}
