"""Replay benchmark: the full shared Mooncake trace through every policy config (docs/benchmarks.md).

    .venv/bin/python bench/bench_replay.py                        # every config under configs/
    .venv/bin/python bench/bench_replay.py --config configs/default.toml --profile 25
    .venv/bin/python bench/bench_replay.py --limit 2000 --repeat 3
    .venv/bin/python bench/bench_replay.py --verify      # + step-by-step replays: identical records, same kept tokens?

Targets, as ratios to `baselines/none` in the same run (printed after the table, from CPU time,
which other work on the machine disturbs least): `none` itself ≥ 600x real time on a quiet core
(59 min of trace in ≤ 5.9 s), exact policies ≥ 0.7x of none's speed, token-level policies
(streamingllm, h2o) ≥ 0.25x. Reports, per config, the
wall and CPU time of the replay (trace loading excluded and shown apart; CPU time is what the
process itself used, so it is less disturbed by other work on the machine), the speed-up of each
over the trace's virtual duration, requests per wall second and the number of engine steps; each
config replays in a fresh process (one core each, one after the other); `--profile N` runs
each replay once more under cProfile and prints the N functions with the most own time.
Timings are wall-clock on a shared machine: compare ratios, and rerun when the load is high.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import multiprocessing
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.replay.loaders import load_trace  # noqa: E402
from harness.replay.run import ReplaySettings, run_replay  # noqa: E402
from record.run_record import TABLES, RunRecord  # noqa: E402
from reference_engine import load_config  # noqa: E402
from reference_engine.core.kv_manager import KVCacheManager  # noqa: E402
from reference_engine.memory import MemoryPlan  # noqa: E402
from reference_engine.policies.registry import make_policy  # noqa: E402

DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "mooncake_fast25" / "conversation_trace.jsonl"
TARGET_SPEEDUP = 600.0  # baselines/none, real time over wall time on a quiet core
BASELINE = "baselines/none.toml"
TARGET_RATIO = {False: 0.7, True: 0.25}  # of none's speed, by whether the policy is approximate


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    p.add_argument(
        "--config",
        type=Path,
        action="append",
        help="policy config(s); default: configs/*.toml and configs/baselines/*.toml",
    )
    p.add_argument("--limit", type=int, default=None, help="first N requests only")
    p.add_argument("--repeat", type=int, default=1, help="replays per config; the best is reported")
    p.add_argument("--tenants", default="hash")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile once more, print the top N")
    p.add_argument(
        "--verify",
        action="store_true",
        help="also replay event-driven and step by step once more and check that every table of "
        "the record is identical, and that every compaction kept the same KV tokens",
    )
    return p.parse_args()


def _default_configs() -> list[Path]:
    """The candidates and the baselines; configs/broken/ (built to fail a gate) is no policy."""
    root = REPO / "configs"
    return sorted([*root.glob("*.toml"), *root.glob("baselines/*.toml")])


def _label(config: Path) -> str:
    """The config's path under configs/ (baselines/none.toml), or its file name."""
    path, root = config.resolve(), REPO / "configs"
    return str(path.relative_to(root)) if path.is_relative_to(root) else config.name


def _differences(fast: Path, slow: Path) -> str:
    """'' when the two records are identical (every table, every float, the final state)."""
    a, b = RunRecord.load(fast), RunRecord.load(slow)
    differ = [table for table in TABLES if not getattr(a, table).equals(getattr(b, table))]
    if a.meta.final != b.meta.final:
        differ.append("meta.final")
    return f"DIFFERENT {', '.join(differ)}" if differ else ""


@contextmanager
def _kept_tokens() -> Iterator[list[tuple[str, int, str]]]:
    """Every compaction a replay applies inside the block: (request, tokens computed, a digest of
    the KV indices kept). The record says how many tokens each dropped, not which: h2o's choice
    follows its scores, which a plan of several steps advances at once."""
    compact, kept = KVCacheManager.compact, []

    def spy(self, r, keep, *args):
        kept.append((r.request_id, r.num_computed_tokens, hashlib.blake2b(keep.tobytes(), digest_size=16).hexdigest()))
        return compact(self, r, keep, *args)

    KVCacheManager.compact = spy
    try:
        yield kept
    finally:
        KVCacheManager.compact = compact


def _verify(trace, engine_config, settings: ReplaySettings, out: Path) -> str:
    """Replay event-driven and step by step; what differs between the two (records, kept tokens)."""
    runs = []
    for step_by_step in (False, True):
        with _kept_tokens() as kept:
            r = run_replay(
                trace, engine_config, replace(settings, step_by_step=step_by_step), out / f"steps-{step_by_step}"
            )
        runs.append((r, kept))
    (fast, fast_kept), (slow, slow_kept) = runs
    differences = _differences(fast.run_dir, slow.run_dir)
    if fast_kept != slow_kept:
        differences = f"{differences or 'DIFFERENT'} kept tokens"
    checked = (
        f"identical record, {len(fast_kept)} compactions keep the same tokens" if fast_kept else "identical record"
    )
    return f"step-by-step {slow.wall_s:.0f} s: {differences or checked}"


def _measure(config: Path, args: argparse.Namespace) -> tuple[str, float, float]:
    """Replay one config `args.repeat` times; returns its table line and best speed-ups (wall,
    CPU). Runs in a
    fresh process per config: in one long process a config replayed after h2o ran 15-35 % slower
    (the heap h2o leaves behind), which measured the order of the list, not the policy."""
    trace = load_trace(args.trace, "auto", args.limit)
    engine_config, settings = load_config(config), ReplaySettings(tenants=args.tenants)
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            c0 = time.process_time()
            r = run_replay(trace, engine_config, settings, Path(tmp) / f"{config.stem}-{i}")
            cpus.append(time.process_time() - c0)
            walls.append(r.wall_s)
        wall, cpu = min(walls), min(cpus)  # best of N: the least disturbed by other work
        speedup = r.stats.end_s / wall
        line = (
            f"{_label(config):<28}{wall:>9.2f}{cpu:>8.2f}{speedup:>9.0f}x{r.stats.end_s / cpu:>9.0f}x"
            f"{len(trace.requests) / wall:>9.0f}{r.meta.final['num_engine_steps']:>9}{r.stats.num_iterations:>8}"
            f"  {'' if _label(config) != BASELINE else 'ok' if speedup >= TARGET_SPEEDUP else 'MISSED'}"
        )
        if args.verify:
            line += "  " + _verify(trace, engine_config, settings, Path(tmp) / f"{config.stem}-verify")
        if args.profile:
            print(line, flush=True)
            prof = cProfile.Profile()
            prof.runcall(run_replay, trace, engine_config, settings, Path(tmp) / f"{config.stem}-profile")
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
    return line, speedup, r.stats.end_s / cpu


def _ratios(cpu_speedups: dict[Path, float]) -> bool:
    """Print each config's speed as a ratio to none's (CPU time) against its target; True if
    every one meets it."""
    base = next((s for c, s in cpu_speedups.items() if _label(c) == BASELINE), None)
    if base is None:
        print(f"(no {BASELINE} in this run: no ratios)")
        return True
    ok = True
    print(f"\n{'config':<28}{'÷ none (cpu)':>13}  target")
    for config, speedup in cpu_speedups.items():
        if _label(config) == BASELINE:
            continue
        engine_config = load_config(config)
        target = TARGET_RATIO[make_policy(engine_config, MemoryPlan.from_config(engine_config)).approximate]
        ok &= speedup / base >= target
        print(
            f"{_label(config):<28}{speedup / base:>13.2f}  ≥ {target}  {'ok' if speedup / base >= target else 'MISSED'}"
        )
    return ok


def main() -> int:
    args = _parse()
    if not args.trace.exists():
        print(f"bench_replay: trace {args.trace} not found (the shared traces sit at ../shared)", file=sys.stderr)
        return 2
    configs = args.config or _default_configs()
    t0 = time.perf_counter()
    trace = load_trace(args.trace, "auto", args.limit)
    load_s = time.perf_counter() - t0
    print(
        f"trace {args.trace.name}: {len(trace.requests)} requests over {trace.duration_s:.0f} s "
        f"(loaded in {load_s:.2f} s); cpu count {os.cpu_count()}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"{'config':<28}{'wall s':>9}{'cpu s':>8}{'speed-up':>10}{'cpu x':>10}{'req/s':>9}{'steps':>9}{'iters':>8}"
        f"  none: {TARGET_SPEEDUP:.0f}x (wall)",
        flush=True,
    )
    worst, cpu_speedups = float("inf"), {}
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn, max_tasks_per_child=1) as pool:
        for config in configs:
            line, speedup, cpu_speedups[config] = pool.submit(_measure, config, args).result()
            if _label(config) == BASELINE:
                worst = speedup
            print(line, flush=True)
    ratios_met = _ratios(cpu_speedups)
    return 0 if worst >= TARGET_SPEEDUP and ratios_met else 1


if __name__ == "__main__":
    sys.exit(main())
