"""`kvgate gate RUN_DIR`: judge a stored run record again, with these or other thresholds.

Writes verdict.json and verdict.junit.xml beside the record, prints the table, appends a
GitHub step summary when `$GITHUB_STEP_SUMMARY` is set. With `--against BASE...` it also gates
the run against stored good runs (harness/regression.py): regression.json and
regression.junit.xml beside it, exit 1 on a regression, 2 when the runs are not comparable.
Exit 0 when every measurable gate passed, 1 when one failed (or a `--require`d gate was not
measurable), 2 when the record or the thresholds cannot be read, nothing at all could be
measured, most gates could not be (a partial verdict, unless `--allow-partial`), or the run
ended early (its record says so: a partial record is never judged, so never passed).
"""

from __future__ import annotations

import argparse
import sys

from gates import evaluate, load_thresholds, write_verdict
from harness.cli import EXIT_HARNESS_ERROR
from harness.judge import VERDICT_OUTPUTS, check_complete, verdict_exit_code
from harness.regression import add_against_argument, gate_against, regression_exit_code
from record.run_record import RecordError, RunRecord


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="evaluate the gates on a stored run record; exit 1 on a violation")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run record directory")
    p.add_argument("--gates", metavar="FILE", help="thresholds TOML overriding gates/thresholds.toml")
    p.add_argument(
        "--only", metavar="NAMES", type=names, action="extend", help="comma-separated gates to run (default: all)"
    )
    p.add_argument(
        "--require",
        metavar="NAMES",
        type=names,
        action="extend",
        default=[],
        help="comma-separated gates that must be measurable (not measurable = fail)",
    )
    add_partial_argument(p)
    add_against_argument(p)
    p.set_defaults(func=run)


def add_partial_argument(p: argparse.ArgumentParser) -> None:
    """--allow-partial: shared by `kvgate gate` and `kvgate run`."""
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="accept a verdict with most gates not measurable as a pass (default: exit 2)",
    )


def names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def run(args: argparse.Namespace) -> int:
    record = load_record(args.run_dir)
    if record is None:
        return EXIT_HARNESS_ERROR
    check_complete(record)
    thresholds = load_thresholds(args.gates)
    verdict = evaluate(record, thresholds, only=args.only, require=args.require, allow_partial=args.allow_partial)
    write_verdict(record.dir, verdict, VERDICT_OUTPUTS)
    exit_code = verdict_exit_code(verdict)
    if args.against:
        regression = gate_against(record, verdict, args.against, thresholds)
        exit_code = max(exit_code, regression_exit_code(regression))
    return exit_code


def load_record(run_dir: str) -> RunRecord | None:
    """The record, or None after saying on stderr why it cannot be read."""
    try:
        return RunRecord.load(run_dir)
    except (RecordError, ValueError, OSError) as err:
        print(f"kvgate: cannot read run record {run_dir}: {err}", file=sys.stderr)
        return None
