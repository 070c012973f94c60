"""The verdict as a rich table on the console: readable in a terminal and in a CI log alike.

Without a TTY rich drops colour and uses a fixed width, so the same table lands in logs; the
outcome is spelled out in words, never only in colour.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from gates.base import GateResult, Outcome
from gates.registry import GATES
from gates.verdict import Verdict

STYLES = {Outcome.PASS: "bold green", Outcome.FAIL: "bold red", Outcome.NOT_MEASURABLE: "yellow"}


class ConsoleOutput:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or stdout_console()

    def emit(self, verdict: Verdict, run_dir: Path) -> None:
        self.console.print(verdict_table(verdict))
        self.console.print(verdict.summary_line(), style=STYLES[verdict.outcome], highlight=False)


def verdict_table(verdict: Verdict) -> Table:
    table = Table(title=f"kvgate verdict — run {verdict.run_id}", title_justify="left")
    table.add_column("gate", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("measured", justify="right", no_wrap=True)
    table.add_column("threshold", justify="right", no_wrap=True)
    table.add_column("explanation", overflow="fold")
    table.add_column("data", overflow="fold")
    for r in verdict.results:
        table.add_row(
            r.gate,
            f"[{STYLES[r.outcome]}]{r.outcome.label}[/]",
            r.measured_text(),
            r.threshold_text(),
            r.explanation,
            data_text(r),
        )
    return table


def data_text(result: GateResult) -> str:
    """What a gate's result rested on, or what it would have needed."""
    if result.sources:
        return ", ".join(result.sources)
    gate = GATES.get(result.gate)
    return "needs " + " or ".join(s.label for s in gate.sources) if gate is not None else "—"


def stdout_console() -> Console:
    """A terminal keeps its width; a log (no TTY) gets 140 columns instead of rich's 80."""
    console = Console()
    return console if console.is_terminal else Console(width=140)
