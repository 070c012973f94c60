"""`kvgate replay`: a real request log through the engine core on a virtual clock.

    kvgate replay --trace conversation_trace.jsonl --policy configs/default.toml
    kvgate replay --trace conversation_trace.jsonl --compare configs/*.toml --out runs/cmp

One policy: one run record (the same contract as a live run) and a summary. `--compare`: every
policy on the same trace, one record each under `--out`, and a comparison table; the configs
replay side by side, one process each (`--jobs`), each on one core as alone. docs/replay.md
explains the options; exit codes are the CLI's (0 ok, 1 a gate failed, 2 a usage/harness error).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.judge import compare, judge
from harness.replay.capacity import prefill_demand
from harness.replay.driver import MaxTokens
from harness.replay.loaders import AUTO, LOADERS, load_trace
from harness.replay.pd import run_pd_replay
from harness.replay.run import ReplayResult, ReplaySettings, run_replay
from harness.replay.summary import ReplaySummary
from harness.replay.tenants import DEFAULT_SPEC, make_assigner
from harness.replay.trace import Trace
from record.errors import KvgateError
from record.run_record import RunRecord
from reference_engine import EngineConfig, load_config

GIB = float(1 << 30)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a request trace through the engine on a virtual clock")
    p.add_argument("--trace", required=True, type=Path, help="trace file (Mooncake JSONL, Azure or BurstGPT CSV)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--policy", type=Path, metavar="CONFIG", help="engine/policy config (TOML)")
    which.add_argument(
        "--compare",
        type=Path,
        nargs="+",
        metavar="CONFIG",
        help="replay the same trace through every config and compare them",
    )
    p.add_argument("--format", default=AUTO, choices=[AUTO, *LOADERS], help="trace format (default: auto)")
    p.add_argument(
        "--rate-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply the arrival rate by X (arrival times divided by X)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="stretch the trace's time axis by X (arrival times multiplied by X)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="replay only the first N requests")
    p.add_argument(
        "--tenants",
        default=DEFAULT_SPEC,
        metavar="SPEC",
        help="tenant assignment: round_robin | fraction:a=0.5,b=0.5 | hash[:a,b][;depth=2] "
        "(default: hash over the config's interactive tenants)",
    )
    p.add_argument(
        "--public-prefix-ids",
        type=_int_set,
        default=frozenset(),
        metavar="IDS",
        help="comma-separated trace prefix ids that are public (shared across tenants) when they "
        "lead a prompt, e.g. 0 for the Mooncake system prompt",
    )
    p.add_argument(
        "--max-tokens",
        choices=[m.value for m in MaxTokens],
        default=MaxTokens.TRACE.value,
        help="max_tokens each request sends: the trace's output length, or unset (engine default)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="run record directory (--compare: the directory that holds one per config); "
        "default runs/replay-<trace>-<time>",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        metavar="S",
        help="virtual seconds between samples (default: the config's server.sample_interval_s)",
    )
    p.add_argument(
        "--step-by-step",
        action="store_true",
        help="one engine step per call, every plan one step (slow; for checking equivalence)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="--compare: replay N configs at once, one process each (default: one per CPU, at most one "
        "per config; 1 replays them one after the other in this process)",
    )
    p.add_argument(
        "--goodput-ttft-ms",
        type=float,
        metavar="MS",
        help="TTFT SLO that counts a request toward goodput (default: the gates' [slo] ttft_ms, 900)",
    )
    p.set_defaults(func=run)


def _int_set(text: str) -> frozenset[int]:
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    console = Console()
    if not console.is_terminal:  # CI logs: room for the comparison table instead of 80 columns
        console.width = max(console.width, 160)
    if args.sample_interval is not None and not args.sample_interval > 0:
        raise KvgateError(f"--sample-interval must be positive, got {args.sample_interval}")
    if args.jobs is not None and args.jobs < 1:
        raise KvgateError(f"--jobs must be at least 1, got {args.jobs}")
    trace = load_trace(args.trace, args.format, args.limit)
    paths = args.compare or [args.policy]
    configs = [load_config(path) for path in paths]  # every config is valid before the first replay starts
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("runs") / f"replay-{args.trace.stem}-{stamp}"
    console.print(
        f"[bold]replay[/] {trace.format} trace {args.trace} — {len(trace.requests)} requests over "
        f"{trace.duration_s:.0f} s" + (f" ({'; '.join(trace.notes)})" if trace.notes else "")
    )
    settings = _settings(args)
    for config in configs:  # a bad --tenants spec fails now, not after the first replays
        make_assigner(settings.tenants, config)
    _warn_if_overloaded(
        console,
        trace.rescaled(rate_scale=settings.rate_scale, time_scale=settings.time_scale),
        paths,
        configs,
        settings.rate_scale,
    )
    if args.compare is None:
        result = _replay(console, trace, args.policy, configs[0], settings, out)
        _print_run(console, result, _slo_s(args))
        judgement = judge(result.run_dir)
        console.print(f"report: [bold]{judgement.report}[/]")
        return judgement.exit_code
    run_dirs = [out / name for name in _names(paths)]
    jobs = min(len(paths), args.jobs or os.cpu_count() or 1)
    results = (
        _replay_side_by_side(console, trace, paths, configs, settings, run_dirs, jobs)
        if jobs > 1
        else [
            _replay(console, trace, path, config, settings, run_dir)
            for path, config, run_dir in zip(paths, configs, run_dirs)
        ]
    )
    summaries = [ReplaySummary.from_record(RunRecord.load(r.run_dir), _slo_s(args)) for r in results]
    _print_comparison(console, results, summaries)
    judgements = [judge(r.run_dir, library_dir=out) for r in results]  # one chart library under out
    report = compare(judgements, out)
    console.print(f"records under [bold]{out}[/]; comparison report [bold]{report}[/]")
    return max(j.exit_code for j in judgements)


def _slo_s(args: argparse.Namespace) -> float | None:
    return None if args.goodput_ttft_ms is None else args.goodput_ttft_ms / 1000


def _warn_if_overloaded(
    console: Console, trace: Trace, paths: Sequence[Path], configs: Sequence[EngineConfig], rate_scale: float
) -> None:
    """Say before the replay starts when the trace offers more prefill than a config's GPU serves
    (the record keeps the same note)."""
    for path, config in zip(paths, configs):
        demand = prefill_demand(trace, config)
        if demand.is_overloaded:
            console.print(f"[bold yellow]warning ({path.name}): {demand.note(rate_scale)}[/]", highlight=False)


def _settings(args: argparse.Namespace) -> ReplaySettings:
    return ReplaySettings(
        tenants=args.tenants,
        public_prefix_ids=args.public_prefix_ids,
        max_tokens=MaxTokens(args.max_tokens),
        rate_scale=args.rate_scale,
        time_scale=args.time_scale,
        sample_interval_s=args.sample_interval,
        step_by_step=args.step_by_step,
    )


def _names(configs: Sequence[Path]) -> list[str]:
    """One directory name per config: its stem, numbered when two configs share one."""
    stems = [c.stem for c in configs]
    return [s if stems.count(s) == 1 else f"{s}-{i}" for i, s in enumerate(stems)]


def _replay(
    console: Console, trace: Trace, config_path: Path, config: EngineConfig, settings: ReplaySettings, run_dir: Path
) -> ReplayResult:
    total_s = trace.duration_s * settings.time_scale / settings.rate_scale
    with _progress(console, config_path.name, total_s) as on_progress:
        return _replay_config(trace, config, settings, run_dir, str(config_path), on_progress)


def _replay_side_by_side(
    console: Console,
    trace: Trace,
    paths: Sequence[Path],
    configs: Sequence[EngineConfig],
    settings: ReplaySettings,
    run_dirs: Sequence[Path],
    jobs: int,
) -> list[ReplayResult]:
    """Each config in its own process (`jobs` at a time), one progress bar each; results in the
    order of `paths`. Replays are independent and single-threaded, so this changes no record."""
    total_s = trace.duration_s * settings.time_scale / settings.rate_scale
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with (
        spawn.Manager() as manager,
        ProcessPoolExecutor(jobs, mp_context=spawn) as pool,
        _progress_bars(console, [p.name for p in paths], total_s) as update,
    ):
        progress = manager.Queue()
        futures = [
            pool.submit(_replay_in_worker, trace, path, config, settings, run_dir, i, progress)
            for i, (path, config, run_dir) in enumerate(zip(paths, configs, run_dirs))
        ]
        pending: set[Future] = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            for i, now_s in _drain(progress):
                update(i, now_s)
            for f in done:
                if not f.exception():
                    update(futures.index(f), total_s)
            if any(f.exception() for f in done):
                for f in pending:
                    f.cancel()
                break
        return [f.result() for f in futures]  # raises the first failure, as one after the other would


def _replay_in_worker(
    trace: Trace,
    path: Path,
    config: EngineConfig,
    settings: ReplaySettings,
    run_dir: Path,
    index: int,
    progress: queue.Queue[tuple[int, float]],
) -> ReplayResult:
    last = [0.0]

    def report(now_s: float) -> None:  # a few times a second: each put is a round trip to the manager
        if time.monotonic() - last[0] >= 0.2:
            last[0] = time.monotonic()
            progress.put((index, now_s))

    return _replay_config(trace, config, settings, run_dir, str(path), report)


def _replay_config(
    trace: Trace,
    config: EngineConfig,
    settings: ReplaySettings,
    run_dir: Path,
    path: str,
    on_progress: Callable[[float], None] | None,
) -> ReplayResult:
    """One config's replay: a P/D pair's through harness/replay/pd.py (no progress bar: it is quick)."""
    if config.pd.enabled:
        return run_pd_replay(trace, config, settings, run_dir, config_path=path)
    return run_replay(trace, config, settings, run_dir, config_path=path, on_progress=on_progress)


def _drain(progress: queue.Queue[tuple[int, float]]) -> Iterator[tuple[int, float]]:
    while True:
        try:
            yield progress.get_nowait()
        except queue.Empty:
            return


@contextmanager
def _progress(console: Console, label: str, total_s: float):
    """A progress bar by virtual time (the trace window; the drain after it shows as full)."""
    with _progress_bars(console, [label], total_s) as update:
        yield lambda now_s: update(0, now_s)


@contextmanager
def _progress_bars(console: Console, labels: Sequence[str], total_s: float):
    """One bar per label by virtual time; yields update(index, now_s)."""
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[virtual]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        tasks = [progress.add_task(label, total=max(total_s, 1e-9), virtual="") for label in labels]

        def update(index: int, now_s: float) -> None:
            shown = f"{now_s:,.0f} / {total_s:,.0f} s" if now_s <= total_s else f"{now_s:,.0f} s, draining"
            progress.update(tasks[index], completed=min(now_s, total_s), virtual=shown)

        yield update


def _ms(value_s: float | None) -> str:
    return "-" if value_s is None else f"{value_s * 1000:,.0f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _by_tier(rates: dict[str, float] | None) -> str:
    """'gpu 5.9% host 12.7%': the hit rate split by the tier the hit tokens came from."""
    return "-" if not rates else " ".join(f"{tier} {_pct(rate)}" for tier, rate in rates.items())


def _print_run(console: Console, result: ReplayResult, slo_s: float | None) -> None:
    s = ReplaySummary.from_record(RunRecord.load(result.run_dir), slo_s)
    meta = result.meta
    table = Table(title=f"replay — policy {s.policy}, config {s.config_digest}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("requests", f"{s.num_requests} ({s.num_ok} ok, {s.num_requests - s.num_ok} not ok)"),
        ("errors by code", ", ".join(f"{k} {v}" for k, v in s.errors_by_code.items()) or "none"),
        ("rejections by tenant", ", ".join(f"{k} {v}" for k, v in s.rejections_by_tenant.items()) or "none"),
        ("TTFT P50 / P95 ms, all ok", f"{_ms(s.ttft_p50_s)} / {_ms(s.ttft_p95_s)}"),
        ("prefix hit rate (tokens)", _pct(s.hit_rate)),
        ("hit rate by tier", _by_tier(s.hit_rate_by_tier)),
        ("evicted blocks", f"{s.num_evicted_blocks:,}"),
        (
            "peak live memory",
            "-"
            if s.peak_live_bytes is None
            else f"{s.peak_live_bytes / GIB:.1f} GiB ({_pct(s.peak_usage)} of the pool)",
        ),
        ("OOM events / preemptions", f"{s.num_oom} / {s.num_preemptions}"),
        (
            f"goodput (TTFT ≤ {s.ttft_slo_s * 1000:.0f} ms)",
            "-" if s.goodput_rps is None else f"{s.goodput_rps:.2f} req/s",
        ),
        (
            "virtual time / wall time",
            f"{result.stats.end_s:,.1f} s / {result.wall_s:.2f} s ({result.speedup:,.0f}x real time)",
        ),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    for note in meta.notes:
        console.print(f"note: {note}", highlight=False)
    console.print(f"run record: [bold]{result.run_dir}[/]")


def _print_comparison(console: Console, results: Sequence[ReplayResult], summaries: Sequence[ReplaySummary]) -> None:
    slo_ms = summaries[0].ttft_slo_s * 1000  # one --goodput-ttft-ms for every config
    table = Table(title="replay comparison — same trace, one record per config")
    columns: list[tuple[str, Callable[[ReplayResult, ReplaySummary], str]]] = [
        ("config", lambda r, s: Path(r.meta.config_path).name),
        ("policy", lambda r, s: s.policy),
        ("hit rate", lambda r, s: _pct(s.hit_rate)),
        ("by tier", lambda r, s: _by_tier(s.hit_rate_by_tier)),
        ("evicted blk", lambda r, s: f"{s.num_evicted_blocks:,}"),
        ("TTFT P50 ms", lambda r, s: _ms(s.ttft_p50_s)),
        ("TTFT P95 ms", lambda r, s: _ms(s.ttft_p95_s)),
        (
            "peak live",
            lambda r, s: (
                "-" if s.peak_live_bytes is None else f"{s.peak_live_bytes / GIB:.1f} GiB {_pct(s.peak_usage)}"
            ),
        ),
        ("OOMs", lambda r, s: str(s.num_oom)),
        ("rejections by tenant", lambda r, s: ", ".join(f"{k} {v}" for k, v in s.rejections_by_tenant.items()) or "0"),
        (f"goodput req/s (≤{slo_ms:.0f} ms)", lambda r, s: "-" if s.goodput_rps is None else f"{s.goodput_rps:.2f}"),
        ("speed-up", lambda r, s: f"{r.speedup:,.0f}x"),
    ]
    for name, _ in columns:
        table.add_column(name, justify="left" if name in ("config", "policy", "rejections by tenant") else "right")
    for r, s in zip(results, summaries):
        table.add_row(*(cell(r, s) for _, cell in columns))
    console.print(table)
