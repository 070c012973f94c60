"""The comparison report: configs (each run once or repeated) side by side, and what they decide.

Sections: the decision (overall choice and why, the best per deciding metric, loud banners when
runs never reached the evict and preempt rungs or a core decision ran in no candidate), the
gates per config, the key numbers per config — median and range over repeats, the 95 % interval
of each ranked number (gates/noise.py) side by side so a reader sees where configs overlap, the
best candidate per metric beyond the noise, and why a number differs from the gate above it —
and bar charts.
Baselines are labelled and never chosen. Every config links its runs' own reports.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

import plotly.graph_objects as go

from gates import Outcome
from gates.base import format_value
from reports.compared import ComparedConfig
from reports.decision import Best, Decision, Noise, decide, decision_lines, spread
from reports.metrics import Metric, comparison_metrics
from reports.page import CLASS_COLORS, Block, badge, esc, figure, note, table, write_page
from reports.pressure import decisions_warning, missing_rungs_warning
from reports.summary import TRAFFIC_CLASSES

COMPARISON_FILE = "comparison.html"


def render_comparison(configs: Sequence[ComparedConfig], out: str | Path) -> Path:
    """Write one HTML page comparing the configs (and its chart library beside it); the path."""
    out = Path(out)
    runs = [run for c in configs for run in c.runs]
    metrics = comparison_metrics(runs)
    decision = decide(configs, metrics)  # what decide_configs gives the console
    alerts = comparison_alerts(configs)
    blocks = [
        Block("decision", "Decision", _decision_block(decision, alerts)),
        Block("gates", "Gates side by side", _gates_table(configs, out.parent)),
        Block("numbers", "Key numbers", _numbers_table(configs, metrics, decision)),
        Block("charts", "Charts", _charts(configs, {m.key: m for m in metrics})),
    ]
    failed = [(c, k) for c in configs if (k := c.num_runs(Outcome.FAIL))]
    count = f"{len(runs)} runs" if len(runs) == len(configs) else f"{len(configs)} configs, {len(runs)} runs"
    subtitle = (
        f"{sum(k for _, k in failed)} of {len(runs)} runs failed a gate: "
        + ", ".join(c.label + (f" ({k} of {len(c.runs)})" if len(c.runs) > 1 else "") for c, k in failed)
        if failed
        else f"no gate failed in any of the {len(runs)} runs"
    )
    return write_page(
        out, f"kvgate comparison — {count}", subtitle, blocks, header=decision_lines(decision)[:1], alerts=alerts
    )


def comparison_alerts(configs: Sequence[ComparedConfig]) -> list[str]:
    """Runs that never reached the evict and preempt rungs; core decisions no candidate took."""
    low = [
        f"{c.name}/{run.record.meta.run_id}" if len(c.runs) > 1 else c.name
        for c in configs
        for run in c.runs
        if missing_rungs_warning(run.summary.pressure)
    ]
    num_runs = sum(len(c.runs) for c in configs)
    alerts = (
        [
            f"{len(low)} of {num_runs} runs never reached the evict and preempt rungs (or cannot show it): "
            f"{', '.join(low)}. Their verdicts say nothing about eviction or preemption."
        ]
        if low
        else []
    )
    untested = decisions_warning(run.summary.pressure for c in configs if not c.baseline for run in c.runs)
    return alerts + ([untested] if untested else [])


def _decision_block(decision: Decision, alerts: Sequence[str]) -> str:
    banners = "".join(f'<div class="banner fail">{esc(a)}</div>' for a in alerts)
    lines = decision_lines(decision)
    items = "".join(f"<li>{'<b>' + esc(line) + '</b>' if i == 0 else esc(line)}</li>" for i, line in enumerate(lines))
    return (
        banners
        + f"<ul>{items}</ul>"
        + note(
            "overall: among candidates that passed every gate in every run, the one better beyond the noise "
            "than each other on more deciding metrics than they are on it; otherwise no winner. The ranking "
            "by medians is an order, not a decision. Baselines are compared and never chosen. "
            "docs/policies.md says what the decision means."
        )
    )


def _gates_table(configs: Sequence[ComparedConfig], page_dir: Path) -> str:
    gates = list(dict.fromkeys(r.gate for c in configs for run in c.runs for r in run.verdict.results))
    rows = [
        ["<b>reports</b>", *(_links(c, page_dir) for c in configs)],
        ["<b>overall</b>", *(_overall_cell(c) for c in configs)],
    ]
    rows += [[f"<code>{esc(gate)}</code>", *(_gate_cell(c, gate) for c in configs)] for gate in gates]
    return table(["gate", *(c.label for c in configs)], rows) + note(
        "hover a value for the gate's explanation; with repeats: the median of the runs' measured values "
        "(min–max) and how many runs each outcome had"
    )


def _links(config: ComparedConfig, page_dir: Path) -> str:
    """Relative links to the config's run reports (one per run: 1, 2, ... when repeated)."""
    links = []
    for i, run in enumerate(config.runs, 1):
        text = "report" if len(config.runs) == 1 else str(i)
        if run.report is None:
            links.append(f'<span title="no report.html for {esc(run.record.dir)}">{text}: n/a</span>')
        else:
            href = quote(Path(os.path.relpath(run.report, page_dir)).as_posix())
            links.append(f'<a href="{esc(href)}" title="run {esc(run.record.meta.run_id)}">{text}</a>')
    return " ".join(links)


def _overall_cell(config: ComparedConfig) -> str:
    outcomes = [run.verdict.outcome for run in config.runs]
    return badge(_worst(outcomes)) + _tally(outcomes)


def _gate_cell(config: ComparedConfig, gate: str) -> str:
    results = [r for run in config.runs if (r := run.verdict.result(gate)) is not None]
    if not results:
        return "—"
    headlines = [r.headline for r in results if r.headline is not None]
    measured = "—"
    if headlines:
        values, unit = [h.value for h in headlines], headlines[0].unit
        low, high = min(values), max(values)
        measured = format_value(statistics.median(values), unit) + (
            f" ({format_value(low, unit)}–{format_value(high, unit)})" if low != high else ""
        )
    worst = next((r for r in results if r.outcome is Outcome.FAIL), results[0])
    return (
        f'{badge(_worst([r.outcome for r in results]))} <span title="{esc(worst.explanation)}">{esc(measured)}'
        f"</span>{_tally([r.outcome for r in results])}"
    )


def _worst(outcomes: Sequence[Outcome]) -> Outcome:
    """As a verdict combines gates: any failure fails, else any pass passes."""
    if Outcome.FAIL in outcomes:
        return Outcome.FAIL
    return Outcome.PASS if Outcome.PASS in outcomes else Outcome.NOT_MEASURABLE


def _tally(outcomes: Sequence[Outcome]) -> str:
    """How many runs had each outcome, when they differ."""
    if len(set(outcomes)) < 2:
        return "" if len(outcomes) == 1 else f" <small>(all {len(outcomes)} runs)</small>"
    counts = ", ".join(f"{o.label.lower()} {outcomes.count(o)}" for o in Outcome if o in outcomes)
    return f" <small>({counts})</small>"


def _numbers_table(configs: Sequence[ComparedConfig], metrics: Sequence[Metric], decision: Decision) -> str:
    best = {b.metric.key: b for b in decision.best}
    rows = [["config digest", *(f"<code>{esc(c.runs[0].record.meta.config_digest)}</code>" for c in configs), "", ""]]
    for previous, metric in zip([None, *metrics], metrics):
        b = best.get(metric.key)
        cells = [_number_cell(c, metric, b, decision.noise) for c in configs]
        label = esc(metric.label) + (" <small>(decides)</small>" if metric.deciding else "")
        same = previous is not None and previous.gate_note == metric.gate_note  # a row per tenant: say it once
        gate_note = "as above" if same else esc(metric.gate_note)
        rows.append([label, *cells, esc(b.text()) if b else "", f"<small>{gate_note}</small>"])
    numeric = tuple(range(1, len(configs) + 1))
    return table(
        ["", *(c.label for c in configs), "best candidate", "vs the gate above"], rows, numeric=numeric
    ) + note(
        "each cell: the median over the config's runs, (min–max) when they differ, and under a ranked number "
        "the 95 % interval of the config's mean (per-request samples and the spread of repeats; none where "
        "neither says); n/a where the record cannot give the number (never 0). Best: the best candidate's "
        "median and every candidate within the noise of it. Rows marked (decides) decide the overall winner."
    )


def _number_cell(config: ComparedConfig, metric: Metric, best: Best | None, noise: Noise) -> str:
    """The median (range), bold for a leader; under a ranked number its interval, where known."""
    s = spread(config, metric)
    if s is None:
        return "n/a"
    text = esc(s.text(metric))
    text = f"<b>{text}</b>" if best is not None and config in best.leaders else text
    bounds = noise.interval(config, metric) if metric.better is not None else None
    return (
        text
        if bounds is None
        else f"{text}<br><small>[{esc(metric.fmt(bounds[0]))}, {esc(metric.fmt(bounds[1]))}]</small>"
    )


def _charts(configs: Sequence[ComparedConfig], metrics: dict[str, Metric]) -> str:
    labels = [c.label for c in configs]
    ttft = go.Figure(
        [
            _bar(configs, metrics[f"p95_ttft:{c}"], name=c, marker_color=CLASS_COLORS[c])
            for c in TRAFFIC_CLASSES
            if f"p95_ttft:{c}" in metrics
        ]
    )
    ttft.update_layout(title="P95 TTFT under load (ms)", barmode="group", bargap=0.3)
    memory = go.Figure(_bar(configs, metrics["peak_live_usage"], marker_color="#0969da"))
    memory.update_layout(title="peak live usage", yaxis_tickformat=".0%", yaxis_range=[0, 1.05], bargap=0.5)
    goodput = go.Figure(_bar(configs, metrics["goodput_tokens"], marker_color="#1a7f37"))
    goodput.update_layout(title="goodput (completed tokens/s under load)", bargap=0.5)
    reasons = [m for key, m in metrics.items() if key.startswith("rejected:")]
    rejections = go.Figure([_bar(configs, m, name=m.key.split(":", 1)[1]) for m in reasons])
    rejections.update_layout(title="requests without an answer, by reason (client view)", barmode="stack", bargap=0.5)
    for fig in (ttft, memory, goodput, rejections):
        fig.update_xaxes(categoryarray=labels)
    figs = [
        (ttft, "fig-cmp-ttft"),
        (memory, "fig-cmp-memory"),
        (goodput, "fig-cmp-goodput"),
        (rejections, "fig-cmp-rejections"),
    ]
    return (
        '<div class="grid2">'
        + "".join(f"<div>{figure(f, i)}</div>" for f, i in figs)
        + "</div>"
        + note("bars: the median over each config's runs; whiskers: min–max when a config ran more than once")
    )


def _bar(configs: Sequence[ComparedConfig], metric: Metric, **style: object) -> go.Bar:
    """One bar per config at its median, with the range of its repeats as whiskers."""
    spreads = [spread(c, metric) for c in configs]
    medians = [None if s is None else s.median for s in spreads]
    repeated = any(s is not None and s.num_runs > 1 for s in spreads)
    error = (
        {
            "type": "data",
            "symmetric": False,
            "array": [0 if s is None else s.high - s.median for s in spreads],
            "arrayminus": [0 if s is None else s.median - s.low for s in spreads],
        }
        if repeated
        else None
    )
    return go.Bar(x=[c.label for c in configs], y=medians, error_y=error, **style)
