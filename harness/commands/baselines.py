"""`kvgate baseline save RUN... --name NAME`: keep good runs to gate later runs against.

    kvgate baseline save runs/ci --name main --store baselines --keep 10
    kvgate run ... --against baselines/main

Copies each run record at or below RUN (a run directory, or a matrix's --out) into
`<store>/<NAME>/<config>/<run_id>/` (record/baseline_store.py), the layout a CI workflow caches;
`--keep N` then keeps each config's newest N runs. The spread of three or more saved runs is the
noise `--against` judges a later run by. (The module is not `harness/baseline.py`: that is a
run's unloaded requests.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import EXIT_OK
from record.baseline_store import save_runs

DEFAULT_STORE = Path("baselines")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", help="keep good runs as baselines for --against")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    save = actions.add_parser("save", help="copy run records into a baseline store")
    save.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories, or directories of them")
    save.add_argument("--name", required=True, help="the baselines' name in the store (e.g. main)")
    save.add_argument(
        "--store", type=Path, default=DEFAULT_STORE, metavar="DIR", help=f"the store (default {DEFAULT_STORE})"
    )
    save.add_argument("--keep", type=_at_least_one, metavar="N", help="keep each config's newest N runs (default: all)")
    save.set_defaults(func=run)


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    saved = save_runs(args.runs, args.store, args.name, args.keep)
    for path in saved:
        print(f"saved {path}")
    return EXIT_OK
