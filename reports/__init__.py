"""kvgate reports: HTML pages from run records and their verdicts.

    from reports import render_run_report, render_comparison
    render_run_report(record, verdict)                  # <run_dir>/report.html
    render_comparison(records, verdicts, "cmp.html")    # one page, runs side by side

Pages open offline: plotly.js is one file per output directory, loaded by a relative path
(reports/page.py). A run report is a list of
`ReportSection`s (reports/section.py), gate table first; docs/reports.md shows each.
"""

from reports.comparison import render_comparison
from reports.run_report import REPORT_FILE, render_run_report
from reports.section import DEFAULT_SECTIONS, SECTIONS, ReportSection, make_section

__all__ = ["DEFAULT_SECTIONS", "REPORT_FILE", "SECTIONS", "ReportSection", "make_section", "render_comparison",
           "render_run_report"]
