"""The comparison report: several runs (typically one per policy, same scenarios) side by side.

Columns are runs; rows are the numbers that decide between policies — peak live memory, P95
TTFT per class, evictions, preemptions, rejections by reason, goodput — then every gate's
result per run, then bar charts of the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import plotly.graph_objects as go

from gates import Outcome, Verdict
from gates.base import Unit, format_value
from harness.run_record import RunRecord
from reports.page import CLASS_COLORS, Block, badge, esc, figure, note, table, write_page
from reports.summary import TRAFFIC_CLASSES, RunSummary, summarize

Row = tuple[str, Callable[[RunSummary], str]]


def render_comparison(records: Sequence[RunRecord], verdicts: Sequence[Verdict], out: str | Path) -> Path:
    """Write one HTML page comparing the runs; the path written."""
    assert len(records) == len(verdicts), "one verdict per record"
    summaries = [summarize(r) for r in records]
    labels = _labels(summaries)
    blocks = [
        Block("gates", "Gates side by side", _gates_table(labels, verdicts)),
        Block("numbers", "Key numbers", _numbers_table(labels, summaries, verdicts)),
        Block("charts", "Charts", _charts(labels, summaries)),
    ]
    failed = [label for label, v in zip(labels, verdicts) if v.outcome is Outcome.FAIL]
    title = f"kvgate comparison — {len(records)} runs"
    subtitle = (f"{len(failed)} of {len(records)} runs failed a gate: {', '.join(failed)}" if failed
                else f"no gate failed in any of the {len(records)} runs")
    return write_page(out, title, subtitle, blocks)


def _labels(summaries: Sequence[RunSummary]) -> list[str]:
    """Policy names, or run ids where two runs share a policy."""
    policies = [s.label for s in summaries]
    return [s.label if policies.count(s.label) == 1 else s.run_id for s in summaries]


def _gates_table(labels: Sequence[str], verdicts: Sequence[Verdict]) -> str:
    gates = list(dict.fromkeys(r.gate for v in verdicts for r in v.results))
    rows = [["<b>overall</b>", *(badge(v.outcome) for v in verdicts)]]
    for gate in gates:
        cells = []
        for v in verdicts:
            r = v.result(gate)
            cells.append("—" if r is None else
                         f'{badge(r.outcome)} <span title="{esc(r.explanation)}">{esc(r.measured_text())}</span>')
        rows.append([f"<code>{esc(gate)}</code>", *cells])
    return table(["gate", *labels], rows) + note("hover a value for the gate's explanation")


def _numbers_table(labels: Sequence[str], summaries: Sequence[RunSummary], verdicts: Sequence[Verdict]) -> str:
    reasons = sorted({k for s in summaries for k in s.rejections})
    rows: list[Row] = [
        ("config digest", lambda s: f"<code>{esc(s.config_digest)}</code>"),
        ("peak live usage", lambda s: _fmt(s.peak_live_usage, Unit.FRACTION)),
        ("peak live blocks", lambda s: _fmt(s.peak_live_blocks, Unit.COUNT)),
        *((f"P95 TTFT {c} (load)", lambda s, c=c: _fmt(s.p95_ttft_ms.get(c), Unit.MILLISECONDS))
          for c in TRAFFIC_CLASSES),
        ("evicted blocks (events)", lambda s: _fmt(s.evicted_blocks, Unit.COUNT)),
        ("cached prefix blocks reclaimed", lambda s: _fmt(s.evicted_cached_blocks, Unit.COUNT)),
        ("preemptions", lambda s: _fmt(s.num_preemptions, Unit.COUNT)),
        *((f"rejected: {r}", lambda s, r=r: str(s.rejections.get(r, 0))) for r in reasons),
        ("goodput (ok requests/s)", lambda s: "n/a" if s.goodput_rps is None else f"{s.goodput_rps:.2f}"),
        ("goodput (tokens/s)", lambda s: "n/a" if s.goodput_tokens_per_s is None else f"{s.goodput_tokens_per_s:.0f}"),
    ]
    body = [[esc(name), *(cell(s) for s in summaries)] for name, cell in rows]
    return table(["", *labels], body, numeric=tuple(range(1, len(labels) + 1)))


def _charts(labels: Sequence[str], summaries: Sequence[RunSummary]) -> str:
    ttft = go.Figure([go.Bar(name=c, x=labels, y=[s.p95_ttft_ms.get(c) for s in summaries],
                             marker_color=CLASS_COLORS[c]) for c in TRAFFIC_CLASSES])
    ttft.update_layout(title="P95 TTFT under load (ms)", barmode="group", bargap=0.3)
    memory = go.Figure(go.Bar(x=labels, y=[s.peak_live_usage for s in summaries], marker_color="#0969da"))
    memory.update_layout(title="peak live usage", yaxis_tickformat=".0%", yaxis_range=[0, 1.05], bargap=0.5)
    goodput = go.Figure(go.Bar(x=labels, y=[s.goodput_tokens_per_s for s in summaries], marker_color="#1a7f37"))
    goodput.update_layout(title="goodput (completed tokens/s under load)", bargap=0.5)
    reasons = sorted({k for s in summaries for k in s.rejections})
    rejections = go.Figure([go.Bar(name=r, x=labels, y=[s.rejections.get(r, 0) for s in summaries]) for r in reasons])
    rejections.update_layout(title="rejections by reason (client view)", barmode="stack", bargap=0.5)
    figs = [(ttft, "fig-cmp-ttft"), (memory, "fig-cmp-memory"), (goodput, "fig-cmp-goodput"),
            (rejections, "fig-cmp-rejections")]
    return '<div class="grid2">' + "".join(f"<div>{figure(f, i)}</div>" for f, i in figs) + "</div>"


def _fmt(value: float | None, unit: Unit) -> str:
    return "n/a" if value is None else esc(format_value(value, unit))
