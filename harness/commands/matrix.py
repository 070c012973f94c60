"""`kvgate matrix`: the same load against every policy config, one report each, one comparison.

    kvgate matrix configs/*.toml --profile quick
    kvgate matrix configs/*.toml --baseline configs/baselines/*.toml --profile ci --out runs/ci

Each config starts its own reference engine and gets the run `kvgate run --policy CONFIG` would
give it (same scenarios, same profile), judged by the gates. Baselines (`--baseline`) run the
same way and appear in the comparison, but their verdicts do not decide the exit code: they are
there to show what the candidates are better than — and no candidate may serve less of the
offered chat in time than the best of them, beyond the noise of the two measurements
(`gates.comparison.goodput_shortfalls`). Configs with
the same digest (default.toml and lru.toml mean the same thing) run once. Exit 0 when every
candidate passed, 1 when one failed a gate or fell below the best baseline's goodput, 2 when a
run could not be made or judged.
"""

from __future__ import annotations

import argparse
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gates.comparison import goodput_shortfalls
from gates.outputs.console import stdout_console
from harness.cli import EXIT_GATE_FAILED, EXIT_HARNESS_ERROR, EXIT_OK
from harness.commands.run import RichProgress, raise_keyboard_interrupt, add_load_arguments, build_plan
from harness.judge import Judgement, compare, judge
from harness.live_run import run_live
from reference_engine import config_digest, load_config
from reference_engine.errors import KvgateError


@dataclass(frozen=True)
class Entry:
    path: Path
    name: str
    baseline: bool


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("matrix", help="run every policy config under the same load; one report each + a comparison")
    p.add_argument("configs", nargs="+", type=Path, metavar="CONFIG", help="candidate policy configs (gated)")
    p.add_argument("--baseline", type=Path, nargs="+", default=[], metavar="CONFIG",
                   help="baseline configs: run and compared, never decide the exit code")
    add_load_arguments(p)
    p.add_argument("--out", type=Path, metavar="DIR", default=Path("runs/matrix"),
                   help="directory for one run record per config and comparison.html (default runs/matrix)")
    p.set_defaults(func=run)


def plan_entries(configs: list[Path], baselines: list[Path]) -> tuple[list[Entry], list[str]]:
    """Unique configs by digest (candidates first), with a directory name each, and notes on
    what was skipped. Every config is loaded (and so validated) before any run starts."""
    entries, notes, seen = [], [], {}
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
    console = stdout_console()  # a CI log gets a summary table wide enough to read
    entries, notes = plan_entries(args.configs, args.baseline)
    for note in notes:
        console.print(f"[dim]{note}[/]")
    judged: list[tuple[Entry, Judgement]] = []
    failed_runs: list[tuple[Entry, str]] = []
    wall_s: dict[Path, float] = {}
    for i, entry in enumerate(entries, 1):
        started = time.monotonic()
        console.rule(f"[bold]{i}/{len(entries)}[/] {entry.path}" + (" (baseline)" if entry.baseline else ""))
        run_args = argparse.Namespace(**{**vars(args), "policy": entry.path, "out": args.out / entry.name,
                                         "target": None, "metrics_url": None, "model": None, "tenants": None})
        try:
            plan = build_plan(run_args)
            with RichProgress(console) as progress:
                result = run_live(plan, progress)
            judged.append((entry, judge(result.run_dir, args.gates)))
        except KvgateError as err:  # one config that cannot run does not hide the others' results
            console.print(f"[red]kvgate: {entry.path}: {err}[/]")
            failed_runs.append((entry, str(err)))
        wall_s[entry.path] = time.monotonic() - started
    shortfalls = goodput_shortfalls([j.verdict for e, j in judged if not e.baseline],
                                    [j.verdict for e, j in judged if e.baseline])
    if judged:
        report = compare([j for _, j in judged], args.out)
        _print_summary(console, judged, failed_runs, wall_s)
        for shortfall in shortfalls:
            console.print(f"[red]goodput below the best baseline: {shortfall.explanation()}[/]")
        console.print(f"reports: [bold]{args.out}/<run>/report.html[/]; comparison report: [bold]{report}[/]")
    return _exit_code(judged, failed_runs, bool(shortfalls))


def _exit_code(judged: list[tuple[Entry, Judgement]], failed_runs: list[tuple[Entry, str]],
               below_baseline: bool) -> int:
    if any(not e.baseline for e, _ in failed_runs) or not judged:
        return EXIT_HARNESS_ERROR
    codes = [j.exit_code for e, j in judged if not e.baseline]
    if EXIT_HARNESS_ERROR in codes:
        return EXIT_HARNESS_ERROR
    return EXIT_GATE_FAILED if EXIT_GATE_FAILED in codes or below_baseline else EXIT_OK


def _print_summary(console: Console, judged: list[tuple[Entry, Judgement]],
                   failed_runs: list[tuple[Entry, str]], wall_s: dict[Path, float]) -> None:
    """One row per config; `wall` is the whole run (engine start to report), what a CI budget counts;
    `run` names the run's directory under --out. Long cells wrap: a CI log is no wider than 140."""
    table = Table(title="kvgate matrix")
    for col in ("config", "policy", "digest", "verdict", "failed gates", "wall", "run"):
        table.add_column(col, overflow="fold")
    for entry, j in judged:
        failed = [g.gate for g in j.verdict.results if g.outcome.value == "fail"]
        verdict = j.verdict.outcome.value + (" (baseline)" if entry.baseline else "")
        style = "red" if failed and not entry.baseline else ("yellow" if failed else "green")
        table.add_row(str(entry.path), j.record.meta.policy, j.record.meta.config_digest,
                      f"[{style}]{verdict}[/]", ", ".join(failed) or "-", f"{wall_s[entry.path]:.0f} s",
                      j.report.parent.name)
    for entry, err in failed_runs:
        table.add_row(str(entry.path), "-", "-", "[red]harness error[/]", err[:60], f"{wall_s[entry.path]:.0f} s", "-")
    console.print(table)
