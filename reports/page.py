"""One HTML page: inline CSS, figures as divs, the chart library from a file beside it.

The page opens offline (no CDN, no fonts, no fetches): a CI artifact must render on a laptop on
a plane. plotly.js is 4.6 MB and the data of a page a few hundred KB, so the library is written
once per output directory (`LIBRARY_FILE`) and every page there loads it by a relative
`<script src>`: a matrix of 14 pages carries one copy, not 14. A page whose library is missing
(copied without its directory) says so instead of showing empty boxes. Figures get stable div
ids so two renders of the same record are byte-identical, and a shared layout so every chart
reads the same way.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from gates import Outcome

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1f2328;
       background: #f6f8fa; }
header { background: #24292f; color: #fff; padding: 16px 32px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; }
header .sub { color: #c9d1d9; font-size: 13px; }
nav { padding: 8px 32px; background: #fff; border-bottom: 1px solid #d0d7de; font-size: 13px; }
nav a { margin-right: 14px; color: #0969da; text-decoration: none; }
main { padding: 8px 32px 48px 32px; max-width: 1400px; }
section { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; margin: 16px 0; padding: 12px 20px; }
section h2 { font-size: 17px; margin: 4px 0 8px 0; }
section h3 { font-size: 14px; margin: 14px 0 6px 0; }
p.note { color: #57606a; font-size: 13px; margin: 4px 0 8px 0; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { border-bottom: 1px solid #d8dee4; padding: 6px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px;
         white-space: nowrap; }
.pass { background: #dafbe1; color: #116329; } .fail { background: #ffebe9; color: #a40e26; }
.not_measurable { background: #fff8c5; color: #7d4e00; }
header .alert { background: #cf222e; color: #fff; font-weight: 600; padding: 6px 10px; border-radius: 6px;
                margin-top: 8px; font-size: 14px; }
.banner { font-size: 15px; font-weight: 600; padding: 10px 14px; border-radius: 6px; margin: 8px 0 12px 0; }
details summary { cursor: pointer; color: #0969da; font-size: 12px; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; max-height: 420px; }
code { font-size: 12px; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
@media (max-width: 1000px) { .grid2 { grid-template-columns: 1fr; } }
"""

LIBRARY_FILE = f"plotly-{get_plotlyjs_version()}.min.js"
"""The chart library's file name: versioned, so a directory holding pages of two kvgate versions
keeps the library each was drawn with."""

CLASS_COLORS = {"interactive": "#0969da", "batch": "#bf8700", "system": "#8250df"}
FIGURE_HEIGHT_PX = 340


@dataclass(frozen=True)
class Block:
    """One section of a page, already rendered."""

    anchor: str
    title: str
    body: str


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def badge(outcome: Outcome) -> str:
    return f'<span class="badge {outcome.value}">{outcome.label}</span>'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """An HTML table; cells are HTML already (escape text with `esc`); `numeric` columns align right."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def details(summary: str, data: Any) -> str:
    """A collapsed <details> holding pretty JSON: evidence and configs a reader opens on demand."""
    text = json.dumps(data, indent=2, default=str)
    return f"<details><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>"


LEGEND_BELOW = {"orientation": "h", "y": -0.18}
LEGEND_RIGHT = {"orientation": "v", "x": 1.01, "y": 1.0}


def figure(fig: go.Figure, div_id: str, height_px: int = FIGURE_HEIGHT_PX, legend: dict = LEGEND_BELOW) -> str:
    """A plotly figure as a div (plotly.js comes once from the page head)."""
    fig.update_layout(
        template="plotly_white",
        height=height_px,
        margin={"l": 60, "r": 20, "t": 36, "b": 40},
        legend=legend,
        font={"size": 12},
    )
    return fig.to_html(
        full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False, "responsive": True}
    )


def limit_line(fig: go.Figure, x: float, text: str, *, log_x: bool) -> None:
    """A dashed red vertical line at a gate's limit, labelled. Shapes take data values on a log
    axis but annotations take log10 of them, so the label is placed by hand."""
    fig.add_vline(x=x, line_dash="dash", line_color="#cf222e")
    fig.add_annotation(
        x=math.log10(x) if log_x else x,
        y=0.02,
        yref="paper",
        text=text,
        showarrow=False,
        xanchor="left",
        font={"size": 10, "color": "#cf222e"},
        bgcolor="rgba(255,255,255,0.8)",
    )


def padded_log_range(values: Sequence[float]) -> list[float]:
    """A log axis range (in log10 units, as plotly wants it) with room on both sides, so a curve
    that is one vertical step does not sit on the frame."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return [0.0, 1.0]
    return [math.log10(min(positive) / 1.6), math.log10(max(positive) * 1.6)]


def write_library(directory: Path) -> Path:
    """The chart library in `directory`, written once (atomically: a page never loads half a file)."""
    path = directory / LIBRARY_FILE
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(get_plotlyjs(), encoding="utf-8")
        partial.replace(path)
    return path


def write_page(
    path: str | Path,
    title: str,
    subtitle: str,
    blocks: Sequence[Block],
    *,
    header: Sequence[str] = (),
    alerts: Sequence[str] = (),
    library_dir: str | Path | None = None,
) -> Path:
    """Write the page and, unless there already, the chart library it loads: in `library_dir`
    (default: the page's own directory) so that pages written to one tree share one copy.
    `header` lines go under the subtitle; `alerts` are red lines there, for what a reader must
    not miss. The path written."""
    path = Path(path)
    library = write_library(Path(library_dir) if library_dir is not None else path.parent)
    src = quote(Path(os.path.relpath(library, path.parent)).as_posix())
    path.write_text(
        _render_page(title, subtitle, blocks, library_src=src, header=header, alerts=alerts), encoding="utf-8"
    )
    return path


def _render_page(
    title: str,
    subtitle: str,
    blocks: Sequence[Block],
    *,
    library_src: str,
    header: Sequence[str] = (),
    alerts: Sequence[str] = (),
) -> str:
    nav = "".join(f'<a href="#{b.anchor}">{esc(b.title)}</a>' for b in blocks)
    sections = "".join(f'<section id="{b.anchor}"><h2>{esc(b.title)}</h2>{b.body}</section>' for b in blocks)
    lines = "".join(f'<div class="sub">{esc(line)}</div>' for line in (subtitle, *header))
    alert_html = "".join(f'<div class="alert">{esc(alert)}</div>' for alert in alerts)
    missing = esc(
        f"The charts need the chart library at {library_src} (relative to this page): copy the "
        f"directory the pages were written to, not a page alone."
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style>"
        f'<script type="text/javascript" src="{esc(library_src)}"></script></head>'
        f"<body><header><h1>{esc(title)}</h1>{lines}{alert_html}</header>"
        f"<nav>{nav}</nav><main>{sections}</main>"
        f'<script>if (!window.Plotly) document.querySelector("main").insertAdjacentHTML("afterbegin", '
        f"'<div class=\"banner fail\">{missing}</div>');</script></body></html>\n"
    )


PHASE_COLORS = {"baseline": "#8c959f", "load": "#cf222e", "cooldown": "#1a7f37"}


def shade_phases(fig: go.Figure, phases: Sequence[Any]) -> None:
    """Light bands for the run's phases (baseline, load, cooldown) behind a time chart."""
    for phase in phases:
        fig.add_vrect(
            x0=phase.start_s,
            x1=phase.end_s,
            fillcolor=PHASE_COLORS.get(phase.name, "#8c959f"),
            opacity=0.06,
            line_width=0,
            annotation_text=phase.name,
            annotation_position="top left",
            annotation_font_size=10,
            annotation_font_color="#57606a",
        )


def share_chart(
    fig: go.Figure, phases: Sequence[Any], y_title: str, div_id: str, height_px: int = FIGURE_HEIGHT_PX
) -> str:
    """A chart of shares of a pool (0–100 %) over the run's time, phases shaded, legend right."""
    shade_phases(fig, phases)
    fig.update_layout(xaxis_title="time (s)", yaxis_title=y_title, yaxis_tickformat=".0%", yaxis_range=[0, 1.05])
    return figure(fig, div_id, height_px=height_px, legend=LEGEND_RIGHT)
