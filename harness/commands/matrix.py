"""`kvgate matrix`: the same load against every policy config, one report each, one comparison.

    kvgate matrix configs/*.toml --profile quick
    kvgate matrix configs/*.toml --baseline configs/baselines/*.toml --profile ci --out runs/ci
    kvgate matrix configs/*.toml --profile quick --repeat 3        # each config 3 times
    kvgate matrix configs/*.toml --profile ci --against baselines/main   # and against stored good runs

Each config starts its own reference engine and gets the run `kvgate run --policy CONFIG` would
give it (same scenarios, same profile), judged by the gates; with `--repeat N` N times, each run
its own record and report (`<out>/<config>/<config>-<k>/`, else `<out>/<config>/`). Baselines
(`--baseline`) run the same way and appear in the comparison, but their verdicts do not decide
the exit code: they are there to show what the candidates are better than — and no candidate
run may serve less of the offered chat in time than the best of them, beyond the noise of the
two measurements (`gates.comparison.goodput_shortfalls`), and no fleet candidate may find less of
its prompts in its replicas' caches than a round-robin baseline fleet (`hit_ratio_shortfalls`). Configs with the
same digest (default.toml and lru.toml mean the same thing) run once. Every page loads the one
chart library at the root of `--out`. The console ends with the verdicts, how far up the
watermark ladder each run went, and the comparison's decision (reports/decision.py), with loud
lines for runs that never reached the evict and preempt rungs and for core decisions no
candidate took. With `--against STORE` each candidate run is also gated against the stored runs
of its own config (harness/regression.py; a config with none stored is noted, not gated).
Exit 0 when every candidate run passed, 1 when one failed a gate, regressed against the store or
fell below the best baseline's goodput (or a fleet below round robin's hit ratio), 2 when a run
could not be made or judged, or is not comparable with the store.
"""

from __future__ import annotations

import argparse
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gates.comparison import GoodputShortfall, HitRatioShortfall, goodput_shortfalls, hit_ratio_shortfalls
from gates.outputs.console import stdout_console
from harness.cli import EXIT_GATE_FAILED, EXIT_HARNESS_ERROR, EXIT_OK
from harness.commands.run import (
    RichProgress,
    add_load_arguments,
    build_plan,
    print_pressure,
    raise_keyboard_interrupt,
    run_arguments,
)
from harness.judge import Judgement, judge
from harness.live_run import run_live
from harness.regression import NoBaselines
from record.baseline_store import find_runs
from record.errors import KvgateError
from reference_engine import config_digest, load_config
from reports import COMPARISON_FILE, ComparedConfig, ComparedRun, render_comparison
from reports.comparison import comparison_alerts
from reports.decision import decide_configs, decision_lines
from reports.pressure import highest_rung, missing_rungs_warning


@dataclass(frozen=True)
class Entry:
    """One run of the matrix: a config, and which of its `--repeat` runs this is."""

    path: Path
    name: str
    baseline: bool
    repeat: int = 1

    def run_dir(self, out: Path, repeats: int) -> Path:
        return out / self.name / f"{self.name}-{self.repeat}" if repeats > 1 else out / self.name


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("matrix", help="run every policy config under the same load; one report each + a comparison")
    p.add_argument("configs", nargs="+", type=Path, metavar="CONFIG", help="candidate policy configs (gated)")
    p.add_argument(
        "--baseline",
        type=Path,
        nargs="+",
        default=[],
        metavar="CONFIG",
        help="baseline configs: run and compared, never decide the exit code",
    )
    add_load_arguments(p)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each config N times, each run its own record and report; the comparison shows the "
        "median and range (default 1)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        default=Path("runs/matrix"),
        help="directory for one run record per config and comparison.html (default runs/matrix)",
    )
    p.set_defaults(func=run)


def plan_entries(configs: list[Path], baselines: list[Path]) -> tuple[list[Entry], list[str]]:
    """Unique configs by digest (candidates first), with a directory name each, and notes on
    what was skipped. Every config is loaded (and so validated) before any run starts."""
    entries: list[Entry] = []
    notes: list[str] = []
    seen: dict[str, Path] = {}  # digest -> the first config with it
    for path, baseline in [(c, False) for c in configs] + [(b, True) for b in baselines]:
        digest = config_digest(load_config(path))
        if digest in seen:
            notes.append(f"{path} has the same digest as {seen[digest]} ({digest}): run once")
            continue
        seen[digest] = path
        name = path.stem if all(e.name != path.stem for e in entries) else f"{path.stem}-{len(entries)}"
        entries.append(Entry(path, name, baseline))
    return entries, notes


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    if args.repeat < 1:
        raise KvgateError(f"--repeat must be at least 1, got {args.repeat}")
    console = stdout_console()  # a CI log gets a summary table wide enough to read
    find_runs(args.against)  # a store that is not there fails now, not after the runs
    entries, notes = plan_entries(args.configs, args.baseline)
    for note in notes:
        console.print(f"[dim]{note}[/]")
    runs = [replace(entry, repeat=k) for entry in entries for k in range(1, args.repeat + 1)]
    judged: list[tuple[Entry, Judgement]] = []
    failed_runs: list[tuple[Entry, str]] = []
    wall_s: dict[Entry, float] = {}
    for i, entry in enumerate(runs, 1):
        started = time.monotonic()
        repeat = f" run {entry.repeat} of {args.repeat}" if args.repeat > 1 else ""
        console.rule(f"[bold]{i}/{len(runs)}[/] {entry.path}{repeat}" + (" (baseline)" if entry.baseline else ""))
        run_dir = entry.run_dir(args.out, args.repeat)
        # the matrix drives locust's users against its own engine: never --target, --rate or --trace
        run_args = run_arguments(**{**vars(args), "policy": entry.path, "out": run_dir})
        try:
            plan = build_plan(run_args)
            with RichProgress(console) as progress:
                result = run_live(plan, progress)
            judgement = _judge(result.run_dir, args, entry, console)
            print_pressure(console, judgement.record.meta.pressure)
            judged.append((entry, judgement))
        except KvgateError as err:  # one config that cannot run does not hide the others' results
            console.print(f"[red]kvgate: {entry.path}: {err}[/]")
            failed_runs.append((entry, str(err)))
        wall_s[entry] = time.monotonic() - started
    candidates = [j.verdict for e, j in judged if not e.baseline]
    baselines = [j.verdict for e, j in judged if e.baseline]
    shortfalls: list[tuple[str, GoodputShortfall | HitRatioShortfall]] = [
        *(("goodput below the best baseline", s) for s in goodput_shortfalls(candidates, baselines)),
        *(("fleet hit ratio below round robin", s) for s in hit_ratio_shortfalls(candidates, baselines)),
    ]
    if judged:
        configs = _compared(entries, judged)
        report = render_comparison(configs, args.out / COMPARISON_FILE)
        _print_summary(console, judged, failed_runs, wall_s, args.out)
        _print_decision(console, configs)
        for what, shortfall in shortfalls:
            console.print(
                f"{what}: {shortfall.explanation()}",
                style="bold red",
                markup=False,
                highlight=False,
            )
        console.print(
            f"reports: [bold]{args.out}/<config>/{'<config>-<k>/' if args.repeat > 1 else ''}report.html[/]; "
            f"comparison report: [bold]{report}[/]"
        )
    return _exit_code(judged, failed_runs, bool(shortfalls))


def _judge(run_dir: Path, args: argparse.Namespace, entry: Entry, console: Console) -> Judgement:
    """The run judged, and a candidate's also against the store of `--against` when it holds
    runs of its config."""
    against = [] if entry.baseline else args.against
    try:
        return judge(run_dir, args.gates, library_dir=args.out, against=against)
    except NoBaselines as err:
        console.print(f"[yellow]{entry.name}: not gated against stored runs: {err}[/]")
        return judge(run_dir, args.gates, library_dir=args.out)


def _compared(entries: list[Entry], judged: list[tuple[Entry, Judgement]]) -> list[ComparedConfig]:
    """The judged runs as configs of the comparison, in the order given, named as their directories."""
    configs = []
    for entry in entries:
        runs = tuple(ComparedRun.of(j.record, j.verdict, j.report) for e, j in judged if e.path == entry.path)
        if runs:
            configs.append(ComparedConfig(entry.name, runs, baseline=entry.baseline))
    return configs


def _print_decision(console: Console, configs: list[ComparedConfig]) -> None:
    """What the comparison decides, then in bold red what it cannot be called a comparison of."""
    console.rule("[bold]decision[/]")
    for line in decision_lines(decide_configs(configs)):
        console.print(line, markup=False, highlight=False)
    for alert in comparison_alerts(configs):
        console.print(alert, style="bold red", markup=False, highlight=False)


def _exit_code(
    judged: list[tuple[Entry, Judgement]], failed_runs: list[tuple[Entry, str]], below_baseline: bool
) -> int:
    if any(not e.baseline for e, _ in failed_runs) or not judged:
        return EXIT_HARNESS_ERROR
    codes = [j.exit_code for e, j in judged if not e.baseline]
    if EXIT_HARNESS_ERROR in codes:
        return EXIT_HARNESS_ERROR
    return EXIT_GATE_FAILED if EXIT_GATE_FAILED in codes or below_baseline else EXIT_OK


def _print_summary(
    console: Console,
    judged: list[tuple[Entry, Judgement]],
    failed_runs: list[tuple[Entry, str]],
    wall_s: dict[Entry, float],
    out: Path,
) -> None:
    """One row per run; `wall` is the whole run (engine start to report), what a CI budget counts;
    `pressure` the highest rung reached (red when below evict or preempt); `run` names the run's
    directory under --out. Long cells wrap: a CI log is no wider than 140."""
    table = Table(title="kvgate matrix")
    for col in ("config", "policy", "digest", "verdict", "failed gates", "pressure", "wall", "run"):
        table.add_column(col, overflow="fold")
    for entry, j in judged:
        failed = [g.gate for g in j.verdict.results if g.outcome.value == "fail"]
        verdict = j.verdict.outcome.value + (" (baseline)" if entry.baseline else "")
        style = "red" if failed and not entry.baseline else ("yellow" if failed else "green")
        table.add_row(
            str(entry.path),
            j.record.meta.policy,
            j.record.meta.config_digest,
            f"[{style}]{verdict}[/]",
            ", ".join(failed) or "-",
            _pressure_cell(j),
            f"{wall_s[entry]:.0f} s",
            j.record.dir.relative_to(out).as_posix(),
        )
    for entry, err in failed_runs:
        table.add_row(str(entry.path), "-", "-", "[red]harness error[/]", err[:60], "-", f"{wall_s[entry]:.0f} s", "-")
    console.print(table)


def _pressure_cell(judgement: Judgement) -> str:
    pressure = judgement.record.meta.pressure
    if pressure is None:
        return "not recorded"
    top = highest_rung(pressure)
    text = "unknown" if pressure.source == "none" else top.rung if top else "none"
    return f"[bold red]{text}[/]" if missing_rungs_warning(pressure) else text
