"""`kvgate sweep`: step an open-loop rate up until the SLO gates fail; report the highest that passed.

    kvgate sweep --target http://127.0.0.1:8000 --tenants me=sk-123 --start-rate 1 --rate-factor 2 --max-steps 6
    kvgate sweep --policy configs/default.toml --rates 2,4,8 --duration 30
    kvgate sweep --target URL --rates 20,40,80 --master-bind 10.0.0.5:5557 --expect-workers 2   # + kvgate worker

Each step is one live run (`kvgate run --rate R`, no baseline) in `--out/step-<k>-<rate>/`,
judged by the SLO gates alone (harness/sweep.py); the sweep stops at the first step that does
not pass, or after its steps. The first step sends the prefix-isolation probes; later steps
record its result, with a note saying so. `--out/sweep.html` plots TTFT and goodput against
the rate, `--out/sweep.json` holds the table. Each step's load is locust's, as every load is:
on `--processes` here, or on workers of other hosts (`--master-bind`), which serve one step
after another (`kvgate worker` reconnects). Exit codes: 0 a rate met the SLO, 1 none did (the
lowest already failed), 2 a harness error (among them a client that lagged past --max-lag-ms:
the rate found so far is then a lower bound). docs/load.md explains it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gates import Thresholds, load_thresholds, slo
from harness.cli import EXIT_GATE_FAILED, EXIT_HARNESS_ERROR, EXIT_OK
from harness.collectors.isolation import Isolation
from harness.commands.run import (
    RichProgress,
    add_arrival_arguments,
    add_master_arguments,
    add_processes_argument,
    build_plan,
    chat_settings,
    positive,
    raise_keyboard_interrupt,
    run_arguments,
)
from harness.live_run import LivePlan, run_live
from harness.loadgen.workloads import workload_of
from harness.profiles import PROFILES
from harness.sweep import GOODPUT_METRIC, judge_step, step_duration_s, step_rates
from record.errors import KvgateError
from record.run_record import RunRecord
from reports.sweep import SWEEP_FILE, StepOutcome, SweepStep, highest_passing, render_sweep, result_line

DEFAULT_STEP_S = 20.0
DEFAULT_MAX_STEPS = 6


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="raise an open-loop rate until the SLO gates fail; report the highest that passed")
    p.add_argument("--target", metavar="URL", help="an already running OpenAI-compatible server (its root URL)")
    p.add_argument(
        "--policy",
        type=Path,
        metavar="CONFIG",
        help="engine/policy config: the reference engine is started with it for every step unless --target",
    )
    p.add_argument(
        "--metrics-url", metavar="URL", help="its Prometheus metrics (default: <target>/metrics; '' for none)"
    )
    p.add_argument("--model", metavar="NAME", help="model name (default: the config's, else the first of /v1/models)")
    p.add_argument("--tenants", metavar="SPEC", help="name=key[:class],... (default: the config's tenants)")
    rates = p.add_mutually_exclusive_group()
    rates.add_argument("--rates", type=_rates, metavar="R1,R2,...", help="the rates to step through, rising")
    rates.add_argument(
        "--start-rate", type=positive(float), default=1.0, metavar="R", help="the first rate, requests/s (default 1)"
    )
    p.add_argument(
        "--rate-factor",
        type=positive(float),
        default=2.0,
        metavar="F",
        help="each step's rate is F times the last (default 2)",
    )
    p.add_argument(
        "--max-steps",
        type=positive(int),
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"at most N steps (default {DEFAULT_MAX_STEPS})",
    )
    p.add_argument(
        "--duration",
        type=positive(float),
        default=DEFAULT_STEP_S,
        metavar="S",
        help=f"seconds of load per step (default {DEFAULT_STEP_S:.0f})",
    )
    p.add_argument(
        "--profile",
        choices=list(PROFILES),
        default="quick",
        help="prompt sizes, timeouts and cooldown of each step (default: quick)",
    )
    p.add_argument("--gates", type=Path, metavar="FILE", help="thresholds TOML overriding gates/thresholds.toml")
    p.add_argument("--sample-interval", type=positive(float), metavar="S", help="seconds between samples")
    p.add_argument("--out", type=Path, metavar="DIR", help="sweep directory (default runs/sweep-<timestamp>)")
    add_arrival_arguments(p)
    add_processes_argument(p)
    add_master_arguments(p)
    # what `kvgate run`'s plan reads and a sweep does not choose: no scenarios, no trace
    p.set_defaults(
        func=run,
        scenarios=[],
        scenarios_dir=None,
        users=None,
        spawn_rate=None,
        workers=0,
        rate=None,
        trace=None,
        limit=None,
        kv_events="",
    )


def _rates(text: str) -> list[float]:
    values = [positive(float)(part) for part in text.split(",") if part.strip()]
    if not values or values != sorted(values):
        raise argparse.ArgumentTypeError(f"expected rising rates such as 1,2,4, got {text!r}")
    return values


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    console = Console()
    out = args.out or Path("runs") / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and any(out.iterdir()):
        raise KvgateError(f"{out} exists and is not empty: give --out a new directory")
    thresholds = load_thresholds(args.gates)
    rates = args.rates or step_rates(start_per_s=args.start_rate, factor=args.rate_factor, num_steps=args.max_steps)
    base = build_plan(run_arguments(**{**vars(args), "out": out}))  # what a sweep does not offer, at run's defaults
    steps: list[SweepStep] = []
    for k, rate in enumerate(rates[: args.max_steps]):
        settings = base.settings.with_(**chat_settings(args, rate))
        plan = dataclasses.replace(
            base,
            run_dir=out / f"step-{k}-{rate:g}",
            scenarios=[],
            mixed_dir=None,
            baseline_requests=0,
            settings=settings,
            open_loop=workload_of(settings),
            duration_s=step_duration_s(rate, base.duration_s),
        )
        console.print(
            f"[bold]step {k + 1}/{min(len(rates), args.max_steps)}[/]: {rate:g} requests/s, {plan.duration_s:.0f} s"
        )
        with RichProgress(console) as progress:
            result = run_live(plan, progress)
        if base.isolation is None:
            base = dataclasses.replace(base, isolation=_probed_once(result.isolation, plan))
        step = judge_step(rate, RunRecord.load(plan.run_dir), thresholds)
        steps.append(step)
        said = step.explanation  # a harness error's note names itself
        if step.outcome is not StepOutcome.HARNESS_ERROR:
            said = f"{step.outcome.value}: {said}"
        console.print(f"  {said}", markup=False, highlight=False)
        if step.outcome is not StepOutcome.PASS:
            break
    return _finish(console, steps, out, thresholds, base.target_url or str(args.policy))


def _probed_once(isolation: Isolation, first: LivePlan) -> Isolation:
    """The first step's isolation probes, for every later step to record with a note saying so:
    what the probes test (does the target keep tenants' and salts' cached prompts apart) does
    not change with the rate, and each probe costs seconds on a slow target."""
    probed = "the same target" if first.target_url else "that step's engine, started from the same config"
    return dataclasses.replace(
        isolation,
        note=f"isolation probes not sent again: meta.probes is the result of those the sweep sent once, "
        f"before its first step ({first.run_dir.name}), to {probed}",
    )


def _finish(console: Console, steps: list[SweepStep], out: Path, thresholds: Thresholds, target: str) -> int:
    best = highest_passing(steps)
    (out / "sweep.json").write_text(
        json.dumps(
            {
                "highest_passing_rate_per_s": best.rate_per_s if best else None,
                "result": result_line(steps),
                "steps": [s.to_dict() for s in steps],
            },
            indent=2,
        )
        + "\n"
    )
    page = render_sweep(
        steps,
        out / SWEEP_FILE,
        ttft_objective_ms=thresholds.for_gate("interactive_ttft")[slo.TTFT_MS],
        goodput_floor=thresholds.for_gate("goodput")[GOODPUT_METRIC],
        target=target,
    )
    table = Table("rate /s", "outcome", "sent", "answered /s", "P95 TTFT ms", "goodput", "P99 lag ms")
    for s in steps:
        table.add_row(
            f"{s.rate_per_s:g}",
            s.outcome.value,
            str(s.num_sent),
            *(
                "—" if v is None else f"{v:{fmt}}"
                for v, fmt in (
                    (s.achieved_per_s, ".2f"),
                    (s.p95_ttft_ms, ".0f"),
                    (s.goodput, ".1%"),
                    (s.lag_p99_ms, ".1f"),
                )
            ),
        )
    console.print(table)
    console.print(f"[bold]{result_line(steps)}[/]")
    console.print(f"report: [bold]{page}[/]")
    if steps and steps[-1].outcome is StepOutcome.HARNESS_ERROR:
        return EXIT_HARNESS_ERROR
    return EXIT_OK if best is not None else EXIT_GATE_FAILED
