"""`kvgate watch`: record and judge a load that another process drives (a plain locust run).

    kvgate watch --target http://127.0.0.1:8000 --rows rows.csv --rows-origin-unix T --out runs/mine

The scenarios' locust plugin starts it when `--kvgate-record-dir` is set, so that a plain
`locust -f scenarios/ --headless ...` ends, like `kvgate run`, with a run record, the verdict
table and an exit code from the gates. It starts the collectors against the target (engine events
and samples from its admin API, Prometheus metrics, GPU memory), prints `ready` on stdout once
they run, copies the request rows the load writes to `--rows` into the record (their times count
from `--rows-origin-unix`), and when its standard input closes (the load is over) waits for the
target to drain, writes the record and judges it: the verdict table and the report, exit 0 when
every measurable gate passed, 1 when one failed, 2 on a harness error. Settings (tenants, keys,
model) come from the `KVGATE_*` environment, as for `kvgate run`; there is no baseline phase.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from harness.judge import judge
from harness.live_run import FollowedLoad, LivePlan, run_live
from harness.loadgen.settings import LoadSettings

READY = "ready"
"""The line `kvgate watch` prints on stdout once its collectors run."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="record and judge a load another process drives (a plain locust run)")
    p.add_argument("--target", required=True, metavar="URL", help="the server the load goes to")
    p.add_argument(
        "--rows",
        required=True,
        type=Path,
        metavar="FILE",
        help="the CSV of request rows the load writes (run-record columns)",
    )
    p.add_argument(
        "--rows-origin-unix", required=True, type=float, metavar="T", help="the unix time the rows' times count from"
    )
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="the run record directory")
    p.add_argument("--metrics-url", metavar="URL", help="Prometheus metrics (default: <target>/metrics; '' for none)")
    p.add_argument("--gates", type=Path, metavar="FILE", help="thresholds TOML overriding gates/thresholds.toml")
    p.add_argument(
        "--cooldown-max",
        type=float,
        default=30.0,
        metavar="S",
        help="wait at most this long for the target to drain after the load (default 30)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    over = threading.Event()
    threading.Thread(target=_wait_for_eof, args=(over,), daemon=True, name="kvgate-watch-stdin").start()
    settings = LoadSettings().with_env(os.environ)
    plan = LivePlan(
        run_dir=args.out,
        config=None,
        config_path=None,
        scenarios=[],
        mixed_dir=None,
        settings=settings,
        duration_s=0.0,
        users=0,
        spawn_rate=0.0,
        target_url=args.target,
        metrics_url=args.metrics_url,
        baseline_requests=0,
        cooldown_max_s=args.cooldown_max,
        cooldown_min_s=min(2.0, args.cooldown_max),
        profile="followed",
        followed=FollowedLoad(args.rows, over.is_set, args.rows_origin_unix),
    )
    result = run_live(plan, _Progress())
    judgement = judge(result.run_dir, args.gates)
    print(f"kvgate watch: run record {result.run_dir}, report {judgement.report}", file=sys.stderr)
    return judgement.exit_code


def _wait_for_eof(over: threading.Event) -> None:
    """The load is over when whoever started this closes its standard input (or exits)."""
    sys.stdin.read()
    over.set()


class _Progress:
    """Phases on stderr; `ready` on stdout when the load phase begins (the collectors run)."""

    def phase(self, name: str, detail: str = "") -> None:
        print(f"kvgate watch: {name}" + (f": {detail}" if detail else ""), file=sys.stderr, flush=True)
        if name == "load":
            print(READY, flush=True)

    def load(self, elapsed_s: float, total_s: float, counts: Mapping[str, int], usage: float | None) -> None:
        pass
