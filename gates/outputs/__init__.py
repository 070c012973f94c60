"""Verdict outputs: where a verdict goes once the gates have spoken.

    json      <run_dir>/verdict.json        the verdict itself (read back by reports)
    junit     <run_dir>/verdict.junit.xml   one testcase per gate, for CI test viewers
    console   a rich table on stdout         works without a TTY (no colour, plain width)
    github    markdown appended to $GITHUB_STEP_SUMMARY when it is set, else nothing

Each is a `VerdictOutput` (one method), registered once in `OUTPUTS`; `make_output(name)`
resolves a name and lists the valid ones when it is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from gates.outputs.console import ConsoleOutput
from gates.outputs.junit import JunitOutput
from gates.outputs.step_summary import StepSummaryOutput
from gates.verdict import Verdict
from record.errors import UnknownNameError


class VerdictOutput(Protocol):
    def emit(self, verdict: Verdict, run_dir: Path) -> Path | None:
        """Write or show the verdict; the path written, if any."""
        ...


class JsonOutput:
    def emit(self, verdict: Verdict, run_dir: Path) -> Path:
        return verdict.write(run_dir)


OUTPUTS: dict[str, Callable[[], VerdictOutput]] = {
    "json": JsonOutput,
    "junit": JunitOutput,
    "console": ConsoleOutput,
    "github": StepSummaryOutput,
}

FILE_OUTPUTS = ("json", "junit")


def make_output(name: str) -> VerdictOutput:
    try:
        return OUTPUTS[name]()
    except KeyError:
        raise UnknownNameError("verdict output", name, OUTPUTS) from None


def write_verdict(run_dir: str | Path, verdict: Verdict, outputs: Iterable[str] = FILE_OUTPUTS) -> list[Path]:
    """Emit the verdict through each named output; the files written."""
    written = [make_output(name).emit(verdict, Path(run_dir)) for name in outputs]
    return [path for path in written if path is not None]
