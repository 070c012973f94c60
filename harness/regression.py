"""`--against BASE...`: a judged run against stored good runs, for `kvgate gate`, `run` and `matrix`.

    verdict = gate_against(record, verdict, [Path("baselines/main")], thresholds)
    regression_exit_code(verdict)     # 0 no regression, 1 a regression, 2 not comparable

BASE is a run directory or any directory with run records below it (a store written by
`kvgate baseline save`, record/baseline_store.py; a matrix's --out). Of those, the runs of the
candidate's own config (by name: its file's stem, else its policy) are its baselines; where
they are all of one other config, those are (a config gated against another's runs); where
they are of several others, none is (`NoBaselines`). The candidate's own directory never is. Each baseline's stored
verdict is read (judged now when it has none). gates/regression.py judges, and
gates/outputs/regression.py writes regression.json, regression.junit.xml, the console table and
the step summary; the run report, rendered after, opens with the regressions.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gates import Thresholds, Verdict, evaluate, read_verdict
from gates.outputs.regression import write_regression
from gates.regression import RegressionVerdict, differences, judge_regressions, not_comparable, pool_notes
from harness.cli import EXIT_GATE_FAILED, EXIT_HARNESS_ERROR, EXIT_OK
from record.baseline_store import config_name, find_runs
from record.errors import KvgateError
from record.run_record import RecordError, RunRecord
from reports.regression_metrics import measure


class NoBaselines(KvgateError):
    """Nothing stored to gate this run against (a matrix notes it and gates the others)."""


def add_against_argument(p: argparse._ActionsContainer) -> None:
    """--against: shared by `kvgate gate`, `kvgate run` and `kvgate matrix`."""
    p.add_argument(
        "--against",
        type=Path,
        nargs="+",
        default=[],
        metavar="BASE",
        help="stored good runs (run directories, or a store of `kvgate baseline save`): exit 1 when "
        "this run is worse beyond their noise and the [regression] budget, 2 when not comparable",
    )


def gate_against(
    record: RunRecord, verdict: Verdict, against: Sequence[Path], thresholds: Thresholds
) -> RegressionVerdict:
    """Judge `record` against the stored runs at or below `against`, write every output."""
    baselines = _baselines(record, against)
    ids = [str(b.dir) for b in baselines]  # a run id may repeat across stores: a directory does not
    found = differences(record.meta, [b.meta for b in baselines])
    if found:
        result = not_comparable(record.meta.run_id, ids, found)
    else:
        stored = {str(b.dir): measure(b, read_verdict(b.dir) or evaluate(b, thresholds)) for b in baselines}
        notes = pool_notes(record.meta, [b.meta for b in baselines])
        result = judge_regressions(record.meta.run_id, measure(record, verdict), stored, thresholds.budgets, notes)
    write_regression(result, record.dir)
    return result


def regression_exit_code(verdict: RegressionVerdict) -> int:
    if not verdict.comparable:
        print(f"kvgate: {verdict.summary()}", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    return EXIT_GATE_FAILED if verdict.regressions else EXIT_OK


def _baselines(record: RunRecord, against: Sequence[Path]) -> list[RunRecord]:
    own = record.dir.resolve()
    dirs = [d for d in find_runs(against) if d.resolve() != own]
    records = []
    for d in dirs:
        try:
            loaded = RunRecord.load(d)
        except (RecordError, ValueError, OSError) as err:
            raise KvgateError(f"cannot read stored run {d}: {err}") from None
        if loaded.meta.ended_early is None and loaded.meta.harness_error is None:
            records.append(loaded)
    where = ", ".join(map(str, against))
    if not records:
        raise NoBaselines(f"no complete stored run to gate against in {where}")
    mine = config_name(record.meta)
    same = [r for r in records if config_name(r.meta) == mine]
    others = sorted({config_name(r.meta) for r in records})
    if not same and len(others) > 1:
        raise NoBaselines(f"no stored run of {mine} in {where} (it has {', '.join(others)})")
    return same or records
