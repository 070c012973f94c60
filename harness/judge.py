"""Judging a finished run: gates -> verdict files -> report, the same for live runs and replay.

    judgement = judge(run_dir)                 # verdict.json, verdict.junit.xml, report.html
    judgement.exit_code                        # 0 pass, 1 a gate failed, 2 nothing (or too little) measurable
                                               # (a record of a run that ended early: PartialRecord)
    judge(run_dir, against=[store])            # and against stored good runs (harness/regression.py):
                                               # 1 on a regression, 2 when not comparable
    compare(judgements, out_dir)               # comparison.html over several configs, one run each

Data flows one way: the run record is read, never changed; only verdict and report files are
added beside it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gates import OUTPUTS, Outcome, Verdict, evaluate, load_thresholds, write_verdict
from gates.regression import RegressionVerdict
from harness.cli import EXIT_GATE_FAILED, EXIT_HARNESS_ERROR, EXIT_OK
from harness.regression import gate_against, regression_exit_code
from record.errors import KvgateError
from record.run_record import RunRecord
from reports import COMPARISON_FILE, group_runs, render_comparison, render_run_report

VERDICT_OUTPUTS = tuple(OUTPUTS)
"""Every verdict output: verdict.json, verdict.junit.xml, the console table, the step summary."""


@dataclass(frozen=True)
class Judgement:
    record: RunRecord
    verdict: Verdict
    report: Path
    exit_code: int
    regression: RegressionVerdict | None = None  # with `against`: this run against the stored ones


class PartialRecord(KvgateError):
    """The run ended early: its record is partial, and a partial record is never judged."""


def check_complete(record: RunRecord) -> None:
    """Raise PartialRecord for a run that ended early: the gates would judge what little it
    measured, and could pass it (an interrupted run is no evidence of a healthy engine); and for
    a run the harness itself failed (a lagging open-loop client measured itself, not the target)."""
    note = record.meta.ended_early
    if note is not None:
        raise PartialRecord(f"{record.dir}: not judged, the record is partial ({note}); run it again")
    if (error := record.meta.harness_error) is not None:
        raise PartialRecord(f"{record.dir}: not judged ({error}); run it again")


def judge(
    run_dir: Path,
    thresholds: Path | None = None,
    outputs: Sequence[str] = VERDICT_OUTPUTS,
    library_dir: Path | None = None,
    *,
    require: Sequence[str] = (),
    allow_partial: bool = False,
    against: Sequence[Path] = (),
) -> Judgement:
    """Evaluate the gates on the record in `run_dir`, write the verdict files and report.html.
    `library_dir`: where the report's chart library goes (default the run directory); runs
    written under one directory (a matrix) share the copy at its root. `require` and
    `allow_partial`: as `gates.evaluate`. `against`: stored good runs to gate against; the
    report then opens with the regressions, and the exit code is the worse of the two."""
    record = RunRecord.load(run_dir)
    check_complete(record)
    limits = load_thresholds(thresholds)
    verdict = evaluate(record, limits, require=require, allow_partial=allow_partial)
    write_verdict(record.dir, verdict, outputs)
    exit_code = verdict_exit_code(verdict)
    regression = gate_against(record, verdict, against, limits) if against else None
    if regression is not None:
        exit_code = max(exit_code, regression_exit_code(regression))
    report = render_run_report(record, verdict, library_dir=library_dir)
    return Judgement(record, verdict, report, exit_code, regression)


def compare(judgements: Sequence[Judgement], out_dir: Path) -> Path:
    """One comparison report of several judged runs, as `out_dir/comparison.html`; runs of the
    same config are its repeats."""
    configs = group_runs([j.record for j in judgements], [j.verdict for j in judgements])
    return render_comparison(configs, Path(out_dir) / COMPARISON_FILE)


def verdict_exit_code(verdict: Verdict) -> int:
    """0 pass, 1 a gate failed; 2 when no gate, or too few of them, could be measured (the run
    proves nothing, or too little to pass: a partial verdict)."""
    if verdict.outcome is Outcome.FAIL:
        return EXIT_GATE_FAILED
    if verdict.outcome is Outcome.NOT_MEASURABLE:
        if verdict.counts()[Outcome.PASS]:
            print(
                "kvgate: most gates could not be measured: a partial verdict is not a pass "
                "(--allow-partial accepts one, --require names the gates that must be measured)",
                file=sys.stderr,
            )
        else:
            print("kvgate: no gate could be measured: the record lacks every signal the gates need", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    return EXIT_OK
