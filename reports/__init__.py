"""kvgate reports: HTML pages from run records and their verdicts.

    from reports import group_runs, render_comparison, render_run_report
    render_run_report(record, verdict)                             # <run_dir>/report.html
    render_comparison(group_runs(records, verdicts), "cmp.html")   # configs side by side, decided

Pages open offline: plotly.js is one file per output directory, loaded by a relative path
(reports/page.py). A run report is a list of `ReportSection`s (reports/section.py), gate table
first, then the pressure reached; a comparison decides between configs (reports/decision.py).
docs/reports.md shows each.
"""

from reports.compared import ComparedConfig, ComparedRun, group_runs
from reports.comparison import COMPARISON_FILE, render_comparison
from reports.run_report import REPORT_FILE, render_run_report
from reports.section import DEFAULT_SECTIONS, SECTIONS, ReportSection, make_section

__all__ = [
    "COMPARISON_FILE",
    "DEFAULT_SECTIONS",
    "REPORT_FILE",
    "SECTIONS",
    "ComparedConfig",
    "ComparedRun",
    "ReportSection",
    "group_runs",
    "make_section",
    "render_comparison",
    "render_run_report",
]
