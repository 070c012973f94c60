"""`kvgate report RUN_DIR...`: self-contained HTML reports from stored run records.

One report per run (`<run_dir>/report.html`, or `--out` for a single run), or with `--compare`
one comparison page across all the runs given (runs of one config digest are its repeats;
`--baseline` labels runs that are compared but never chosen). The verdict shown is the run's verdict.json when
it has one, else the gates evaluated now (with `--gates FILE`, always evaluated now). Reports
do not judge: the exit code is 0 once the pages are written, 2 when a record cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gates import stored_or_evaluated
from harness.cli import EXIT_HARNESS_ERROR, EXIT_OK
from harness.commands.gate import load_record
from reports import group_runs, render_comparison, render_run_report

DEFAULT_COMPARISON = "kvgate-comparison.html"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write HTML reports for stored run records (one each, or --compare)")
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run record directories")
    p.add_argument("--compare", action="store_true", help="one comparison page across the runs instead")
    p.add_argument("--out", metavar="FILE", help=f"output file (one run, or --compare; default {DEFAULT_COMPARISON})")
    p.add_argument("--gates", metavar="FILE", help="thresholds TOML: re-evaluate the gates with it")
    p.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        nargs="+",
        default=[],
        help="--compare: baseline runs, compared beside the others and never chosen",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.out and len(args.run_dirs) > 1 and not args.compare:
        print("kvgate: --out names one file: give one RUN_DIR, or add --compare", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    if args.baseline and not args.compare:
        print("kvgate: --baseline labels runs of a comparison: add --compare", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    loaded = [load_record(d) for d in [*args.run_dirs, *args.baseline]]
    records = [r for r in loaded if r is not None]
    if len(records) < len(loaded):  # load_record said why
        return EXIT_HARNESS_ERROR
    verdicts = [stored_or_evaluated(r, args.gates) for r in records]
    if args.compare:
        configs = group_runs(records, verdicts, baselines=[Path(d) for d in args.baseline])
        paths = [render_comparison(configs, Path(args.out or DEFAULT_COMPARISON))]
    else:
        paths = [render_run_report(r, v, args.out) for r, v in zip(records, verdicts)]
    for path in paths:
        print(f"report: {path}")
    return EXIT_OK
