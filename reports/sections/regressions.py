"""The release gate in the run report: what regressed against the stored runs, first on the page.

Read from regression.json (gates/regression.py writes it when the run was gated `--against`
stored runs): a table of every metric compared, regressions first, with its delta and interval
and the budget, and a chart of each judged metric relative to the baselines' mean: the
baselines' own runs as grey points (their spread is the noise), this run with its interval.
Absent when the run was not gated against stored runs.
"""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go

from gates.base import Unit, format_value
from gates.regression import REGRESSION_FILE, Status
from record.run_record import RunRecord
from reports.page import Block, esc, figure, note, table

TITLE = "Regressions against stored runs"


def regression_block(record: RunRecord) -> tuple[Block, str | None] | None:
    """The section and, when a metric regressed or the runs are not comparable, the alert for
    the page's top; None when the run was not gated against stored runs."""
    path = record.dir / REGRESSION_FILE
    if not path.exists():
        return None
    stored = json.loads(path.read_text())
    alert = None if stored["comparable"] and not stored["regressions"] else f"release gate: {stored['summary']}"
    return Block("regressions", TITLE, _render(stored)), alert


def _render(stored: dict[str, Any]) -> str:
    head = f"<p><b>{esc(stored['summary'])}</b></p>"
    if not stored["comparable"]:
        return head + note("nothing was compared: the runs differ in " + "; ".join(stored["differences"]))
    order = list(Status)
    rows = sorted(stored["metrics"], key=lambda m: order.index(Status(m["status"])))
    cells = [
        [
            esc(m["label"]),
            _fmt(m, m["candidate"]),
            esc(", ".join(_fmt(m, v) for v in m["baselines"])),
            esc(_interval(m)),
            esc(m["budget"]),
            f"<b>{esc(m['status'])}</b>" if m["status"] == Status.REGRESSED.value else esc(m["status"]),
        ]
        for m in rows
    ]
    header = ["metric", "this run", "baselines", "delta [interval]", "budget", "status"]
    return (
        head
        + figure(_chart(rows), "fig-regressions", height_px=max(240, 28 * len(rows)))
        + table(header, cells)
        + note(
            "a metric regresses only when it is worse than the baselines' mean beyond both their noise "
            "(the interval lies wholly on the worse side) and its [regression] budget; docs/gates.md"
        )
    )


def _fmt(m: dict[str, Any], value: float) -> str:
    return format_value(value, Unit(m["unit"]))


def _interval(m: dict[str, Any]) -> str:
    if m["delta"] is None:
        return "noise unknown (needs 3 baseline runs)"
    mean = m["candidate"] - m["delta"]
    if mean:
        return f"{m['delta'] / abs(mean):+.1%} [{m['low'] / abs(mean):+.1%}, {m['high'] / abs(mean):+.1%}]"
    return f"{m['delta']:+g} [{m['low']:+g}, {m['high']:+g}]"


def _chart(rows: list[dict[str, Any]]) -> go.Figure:
    """Each judged metric with a non-zero baseline mean, relative to it (0 = the baselines' mean)."""
    judged = [m for m in rows if m["delta"] is not None and m["candidate"] != m["delta"]]
    fig = go.Figure()
    for m in judged:
        mean = m["candidate"] - m["delta"]
        fig.add_trace(
            go.Scatter(
                x=[(v - mean) / abs(mean) for v in m["baselines"]],
                y=[m["label"]] * len(m["baselines"]),
                mode="markers",
                marker={"color": "#8c959f", "size": 7},
                name="baseline runs",
                showlegend=m is judged[0],
            )
        )
        regressed = m["status"] == Status.REGRESSED.value
        fig.add_trace(
            go.Scatter(
                x=[m["delta"] / abs(mean)],
                y=[m["label"]],
                mode="markers",
                marker={"color": "#cf222e" if regressed else "#0969da", "size": 10},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [(m["high"] - m["delta"]) / abs(mean)],
                    "arrayminus": [(m["delta"] - m["low"]) / abs(mean)],
                },
                name="this run (interval)",
                showlegend=m is judged[0],
            )
        )
    fig.update_layout(title="each metric against the baselines' mean", xaxis_tickformat="+.0%")
    return fig
