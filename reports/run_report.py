"""The report of one run: `render_run_report(record, verdict)` -> report.html beside the record.

A run gated against stored runs (regression.json beside it) opens with its regressions
(reports/sections/regressions.py), before the gate table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gates import Verdict
from record.run_record import RunRecord
from reports.page import Block, write_page
from reports.prefix_reuse import cache_warning, reuse_line
from reports.pressure import missing_rungs_warning, pressure_line
from reports.section import DEFAULT_SECTIONS, make_section
from reports.sections.regressions import regression_block

REPORT_FILE = "report.html"


def render_run_report(
    record: RunRecord,
    verdict: Verdict,
    out: str | Path | None = None,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    library_dir: str | Path | None = None,
) -> Path:
    """Write one HTML page (gate table first) and, where it is not yet, the chart library it
    loads (`library_dir`, default beside the page); the path written."""
    chosen = [make_section(name) for name in sections]
    blocks = [Block(s.name, s.title, s.render(record, verdict)) for s in chosen]
    meta = record.meta
    title = f"kvgate — {meta.policy or 'run'} — {verdict.outcome.label}"
    subtitle = (
        f"run {meta.run_id} · {meta.mode} · config {meta.config_digest or 'digest unknown'} · "
        f"{meta.duration_s:.0f} s · scenarios: {', '.join(meta.scenarios) or 'n/a'}"
    )
    alerts = [warning for warning in (missing_rungs_warning(meta.pressure), cache_warning(record)) if warning]
    if (regressions := regression_block(record)) is not None:
        block, alert = regressions
        blocks.insert(0, block)
        alerts += [alert] if alert else []
    reuse = reuse_line(record)
    path = Path(out) if out is not None else record.dir / REPORT_FILE
    return write_page(
        path,
        title,
        subtitle,
        blocks,
        header=[pressure_line(meta.pressure), *([reuse] if reuse else [])],
        alerts=alerts,
        library_dir=library_dir,
    )
