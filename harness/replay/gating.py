"""The integration point between replay and the gates and reports (wired in by the lead).

Replay writes the same run record as a live run, so it judges and shows it the same way: the
functions below take run directories, nothing replay-specific. Until gates and reports are wired
in they return None and `kvgate replay` says that no verdict was produced (exit code 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def gate_and_report(run_dir: Path) -> int | None:
    """Evaluate the gates on the record in `run_dir`, write its verdict and report.html.

    Returns the exit code (0 all gates passed, 1 a gate failed), or None while not wired.
    Intended body: `gates.evaluate(RunRecord.load(run_dir), thresholds)`, `gates.write_verdict`,
    `reports.render_run_report(...)`."""
    return None


def compare_report(run_dirs: Sequence[Path], out_dir: Path) -> Path | None:
    """Render one comparison report of `run_dirs` (one replay per policy, same trace) into
    `out_dir`; returns its path, or None while not wired. Intended body:
    `reports.render_comparison([RunRecord.load(d) for d in run_dirs], ...)`."""
    return None
