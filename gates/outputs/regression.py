"""Where a release-gate verdict goes: regression.json, regression.junit.xml, the console, the
step summary (the last only when `$GITHUB_STEP_SUMMARY` is set).

    paths = write_regression(verdict, run_dir)

JUnit has one testcase per metric compared: a `<failure>` for a regression, `<skipped>` for a
metric the noise could not be known for, and an `<error>` testcase when the runs are not
comparable, so a CI test viewer lists what regressed with its interval beside the gate verdicts.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.table import Table

from gates.outputs.console import stdout_console
from gates.regression import RegressionVerdict, Status

JUNIT_FILE = "regression.junit.xml"

_STYLE = {Status.REGRESSED: "bold red", Status.BETTER: "green", Status.NOT_JUDGED: "dim"}
_ORDER = list(Status)


def write_regression(verdict: RegressionVerdict, run_dir: Path) -> list[Path]:
    """Every output of the verdict; the files written."""
    paths = [verdict.write(run_dir), _write_junit(verdict, run_dir)]
    stdout_console().print(regression_table(verdict))
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write(regression_markdown(verdict))
        paths.append(Path(target))
    return paths


def regression_table(verdict: RegressionVerdict) -> Table:
    table = Table(title=f"kvgate release gate — {verdict.summary()}", title_justify="left")
    for col in ("metric", "this run", "baselines", "delta [interval]", "budget", "status"):
        table.add_column(col, overflow="fold")
    for c in sorted(verdict.comparisons, key=lambda c: _ORDER.index(c.status)):
        base = ", ".join(c.metric.fmt(v) for v in c.baselines)
        style = _STYLE.get(c.status, "")
        table.add_row(
            c.metric.label, c.metric.fmt(c.candidate), base, c.delta_text(), c.budget.text, c.status.value, style=style
        )
    return table


def regression_markdown(verdict: RegressionVerdict) -> str:
    icon = "❌" if verdict.regressions else ("⚠️" if not verdict.comparable else "✅")
    lines = [f"### kvgate release gate {icon} — run `{verdict.run_id}`", "", verdict.summary(), ""]
    if verdict.regressions:
        lines += ["| metric | delta [interval] | budget |", "|---|---|---|"]
        lines += [f"| {c.metric.label} | {c.delta_text()} | {c.budget.text} |" for c in verdict.regressions]
    return "\n".join(lines) + "\n\n"


def _write_junit(verdict: RegressionVerdict, run_dir: Path) -> Path:
    cases = []
    for c in verdict.comparisons:
        case = ET.Element("testcase", classname="kvgate.regression", name=c.metric.key)
        if c.status is Status.REGRESSED:
            ET.SubElement(case, "failure", message=c.text(), type="Regression").text = c.text()
        elif c.status is Status.NOT_JUDGED:
            ET.SubElement(case, "skipped", message=c.text())
        else:
            ET.SubElement(case, "system-out").text = c.text()
        cases.append(case)
    if not verdict.comparable:
        case = ET.Element("testcase", classname="kvgate.regression", name="comparable")
        ET.SubElement(case, "error", message=verdict.summary(), type="NotComparable")
        cases.append(case)
    counts = {
        "tests": str(len(cases)),
        "failures": str(len(verdict.regressions)),
        "skipped": str(sum(c.status is Status.NOT_JUDGED for c in verdict.comparisons)),
        "errors": str(int(not verdict.comparable)),
    }
    suites = ET.Element("testsuites", {"name": "kvgate.regression", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": f"kvgate.regression.{verdict.run_id}", **counts})
    suite.extend(cases)
    path = Path(run_dir) / JUNIT_FILE
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
    return path
