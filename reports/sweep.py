"""The sweep report: which rate a target serves within the SLO, as a plot and a table.

`SweepStep` is one step as `kvgate sweep` judged it (harness/sweep.py); `highest_passing` reads
the answer off the steps, for the page and the console alike.

One page (`SWEEP_FILE`) beside the steps' run directories: the highest passing rate in the
header, P95 TTFT against the offered rate (from the actual and from the intended send time,
with the objective as a line), goodput against the rate (with its floor), and one table row
per step linking its record. Same page style as every report (reports/page.py): offline,
plotly.js once beside it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import quote

import plotly.graph_objects as go

from reports.page import Block, esc, figure, note, table, write_page

SWEEP_FILE = "sweep.html"


class StepOutcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    HARNESS_ERROR = "harness error"


@dataclass(frozen=True, kw_only=True)
class SweepStep:
    """One rate step, as the table and the plot show it (None: not measured)."""

    rate_per_s: float
    run_dir: Path
    outcome: StepOutcome
    explanation: str
    num_sent: int
    num_ok: int
    achieved_per_s: float | None
    p95_ttft_ms: float | None
    p95_ttft_from_intended_ms: float | None
    goodput: float | None
    lag_p99_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "run_dir": str(self.run_dir), "outcome": self.outcome.value}


def highest_passing(steps: Sequence[SweepStep]) -> SweepStep | None:
    """The last step that passed before the first that did not (steps in rising rate)."""
    best = None
    for step in steps:
        if step.outcome is not StepOutcome.PASS:
            break
        best = step
    return best


_BADGE = {StepOutcome.PASS: "pass", StepOutcome.FAIL: "fail", StepOutcome.HARNESS_ERROR: "not_measurable"}


def result_line(steps: Sequence[SweepStep]) -> str:
    """The sweep's answer in one line (the console prints it too)."""
    best = highest_passing(steps)
    if not steps:
        return "no step ran"
    last = steps[-1]
    if best is None:
        return (
            f"no rate met the SLO: the lowest, {steps[0].rate_per_s:g}/s, already {steps[0].outcome.value}ed"
            if steps[0].outcome is StepOutcome.FAIL
            else f"no rate measured: {steps[0].explanation}"
        )
    if last.outcome is StepOutcome.PASS:
        return f"every step met the SLO: at least {best.rate_per_s:g} requests/s (raise the rates to find the limit)"
    if last.outcome is StepOutcome.HARNESS_ERROR:
        return (
            f"highest rate meeting the SLO: at least {best.rate_per_s:g} requests/s; at {last.rate_per_s:g}/s the "
            f"client could not keep its schedule (a harness limit, not the target's)"
        )
    return f"highest rate meeting the SLO: {best.rate_per_s:g} requests/s (failed at {last.rate_per_s:g}/s)"


def render_sweep(
    steps: Sequence[SweepStep], out: str | Path, *, ttft_objective_ms: float, goodput_floor: float, target: str
) -> Path:
    out = Path(out)
    blocks = [
        Block("plot", "TTFT and goodput against the offered rate", _plots(steps, ttft_objective_ms, goodput_floor)),
        Block("steps", "Steps", _table(steps, out.parent)),
    ]
    return write_page(
        out,
        f"kvgate sweep — {target}",
        result_line(steps),
        blocks,
        header=[
            (
                f"SLO: critical interactive P95 TTFT ≤ {ttft_objective_ms:.0f} ms and goodput ≥ "
                f"{goodput_floor:.0%} ([slo] and [goodput] of the thresholds)"
            )
        ],
    )


def _plots(steps: Sequence[SweepStep], ttft_objective_ms: float, goodput_floor: float) -> str:
    rates = [s.rate_per_s for s in steps]
    ttft = go.Figure()
    ttft.add_scatter(x=rates, y=[s.p95_ttft_ms for s in steps], mode="lines+markers", name="P95 TTFT from sent")
    ttft.add_scatter(
        x=rates,
        y=[s.p95_ttft_from_intended_ms for s in steps],
        mode="lines+markers",
        name="P95 TTFT from intended send",
        line={"dash": "dot"},
    )
    ttft.add_hline(y=ttft_objective_ms, line_dash="dash", line_color="#cf222e", annotation_text="objective")
    ttft.update_layout(xaxis_title="offered rate (requests/s)", yaxis_title="ms")
    good = go.Figure()
    good.add_scatter(x=rates, y=[s.goodput for s in steps], mode="lines+markers", name="goodput")
    good.add_scatter(
        x=rates, y=[s.achieved_per_s for s in steps], mode="lines+markers", name="answered / s", yaxis="y2"
    )
    good.add_hline(y=goodput_floor, line_dash="dash", line_color="#cf222e", annotation_text="floor")
    good.update_layout(
        xaxis_title="offered rate (requests/s)",
        yaxis={"title": "goodput", "tickformat": ".0%"},
        yaxis2={"title": "answered / s", "overlaying": "y", "side": "right"},
    )
    return (
        note(
            "Each step is its own run record, open loop at the offered rate; the sweep stops at the first step "
            "that fails the SLO gates. TTFT from the intended send time adds the client's lag: what a user who "
            "arrived on schedule waited."
        )
        + f'<div class="grid2">{figure(ttft, "sweep-ttft")}{figure(good, "sweep-goodput")}</div>'
    )


def _table(steps: Sequence[SweepStep], page_dir: Path) -> str:
    def number(value: float | None, fmt: str) -> str:
        return "—" if value is None else format(value, fmt)

    rows = [
        [
            f'<a href="{quote(Path(os.path.relpath(s.run_dir, page_dir)).as_posix())}">{s.rate_per_s:g}</a>',
            f'<span class="badge {_BADGE[s.outcome]}">{esc(s.outcome.value)}</span>',
            str(s.num_sent),
            str(s.num_ok),
            number(s.achieved_per_s, ".2f"),
            number(s.p95_ttft_ms, ".0f"),
            number(s.p95_ttft_from_intended_ms, ".0f"),
            number(s.goodput, ".1%"),
            number(s.lag_p99_ms, ".1f"),
            esc(s.explanation),
        ]
        for s in steps
    ]
    return table(
        [
            "offered /s",
            "outcome",
            "sent",
            "answered",
            "answered /s",
            "P95 TTFT ms",
            "from intended ms",
            "goodput",
            "P99 lag ms",
            "why",
        ],
        rows,
        numeric=(2, 3, 4, 5, 6, 7, 8),
    )
