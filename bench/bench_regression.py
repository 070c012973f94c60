"""The release gate's power and false alarms: regressions planted through the reference engine's
config, judged as `kvgate gate --against` judges them.

    .venv/bin/python bench/bench_regression.py --baselines 6 --candidates 3          # quick profile
    .venv/bin/python bench/bench_regression.py --load open --rate 8 --duration 6     # open loop
    .venv/bin/python bench/bench_regression.py --read runs/bench_regression          # summarise again

Variants of configs/default.toml with a step budget of 640 tokens (engine.max_num_batched_tokens:
one step then grows a request's KV by at most 80 blocks, so the quick profile's ladder, rungs 3 %
of the pool apart, stays valid on a pool 15 % smaller), written as JSON configs under --out:
  base      that config
  slow10    the sim executor 10 % slower: mfu and mbu / 1.1, step overhead × 1.1
  pool15    the pool 15 % smaller in blocks: kv_bytes_safety 1/0.85 (each block costs 17.6 % more
            bytes of the same memory; the profile pins the memory, not the blocks)
  noevict   a worse eviction policy: kv_cache.policy = "none" (nothing evicted: the pool fills)

Each variant runs `kvgate run` (one engine per run, one run after the other) `--candidates` times,
and base `--baselines` times. A trial is 3 baseline runs (`--trial-baselines`) + 1 candidate run, judged by
gates/regression.py with the default budgets: every 3 of the base runs against every candidate
run of a planted variant (detection: the share of trials with a regression), and every 3 of the
base runs against each other base run held out (false alarms). Trials reuse runs, so they are not
independent: the run counts are printed beside the rates. `spread` gives, for the headline
metrics, the base runs' coefficient of variation and the repeats each side (candidate and
baselines) a 10 % change needs to clear the noise of a verdict of 25 metrics
(2 · (z · cv / 0.10)², z = `gates.noise.z_quantile(25)`). Writes `<out>/regression_bench.json`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gates import load_thresholds, read_verdict  # noqa: E402
from gates.noise import z_quantile  # noqa: E402
from gates.regression import Measured, judge_regressions  # noqa: E402
from record.run_record import RunRecord  # noqa: E402
from reference_engine import load_config  # noqa: E402
from reference_engine.config.loader import save_config, with_overrides  # noqa: E402
from reports.regression_metrics import measure  # noqa: E402

KVGATE = Path(sys.executable).with_name("kvgate")
BASE_CONFIG = REPO / "configs" / "default.toml"
STEP_BUDGET = {"engine.max_num_batched_tokens": 640}
VARIANTS = {
    "base": {},
    "slow10": {"sim.mfu": 0.65 / 1.1, "sim.mbu": 0.7 / 1.1, "sim.step_overhead_ms": 1.7 * 1.1},
    "pool15": {"engine.kv_bytes_safety": 1 / 0.85},
    "noevict": {"kv_cache.policy": "none"},
}
SPREAD_METRICS = ("ttft_median.interactive", "ttft_p95.interactive", "goodput", "prefix_hit_ratio", "rejections")
VERDICT_METRICS = 25  # about how many metrics one verdict compares (the Bonferroni family)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baselines", type=int, default=6, help="base runs (default 6)")
    p.add_argument("--candidates", type=int, default=3, help="runs of each planted variant (default 3)")
    p.add_argument("--variants", nargs="+", default=[v for v in VARIANTS if v != "base"], choices=list(VARIANTS))
    p.add_argument("--load", choices=["quick", "open"], default="quick", help="quick: the closed-loop pressure mix")
    p.add_argument("--rate", type=float, default=8.0, help="--load open: chat requests per second")
    p.add_argument("--duration", type=float, help="seconds of load (default: the profile's)")
    p.add_argument("--scenarios", help="comma-separated scenarios (default: the profile's mix)")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench_regression")
    p.add_argument("--read", type=Path, metavar="DIR", help="summarise the runs already under DIR; run nothing")
    p.add_argument("--trial-baselines", type=int, default=3, metavar="N", help="baseline runs per trial (default 3)")
    return p.parse_args()


def main() -> int:
    args = _parse()
    out = args.read or args.out
    if args.read is None:
        _run_all(args)
    summary = summarise(out, args.trial_baselines)
    (out / "regression_bench.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


def _run_all(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    config = load_config(BASE_CONFIG)
    plan = [("base", k) for k in range(args.baselines)]
    plan += [(v, k) for k in range(args.candidates) for v in args.variants]
    for variant, k in sorted(plan, key=lambda vk: (vk[1], vk[0])):  # interleaved: drift hits every variant
        path = args.out / f"{variant}.json"
        if not path.exists():
            save_config(with_overrides(config, {**STEP_BUDGET, **VARIANTS[variant]}), path)
        run_dir = args.out / variant / f"{variant}-{k}"
        if (run_dir / "verdict.json").exists():
            continue
        cmd = [str(KVGATE), "run", "--policy", str(path), "--profile", "quick", "--out", str(run_dir)]
        if args.load == "open":
            cmd += ["--rate", str(args.rate), "--seed", "1"]
        if args.duration:
            cmd += ["--duration", str(args.duration)]
        if args.scenarios:
            cmd += ["--scenarios", args.scenarios]
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        print(f"{run_dir.name}: exit {done.returncode} in {time.monotonic() - started:.0f} s", flush=True)


def summarise(out: Path, num_baselines: int = 3) -> dict:
    budgets = load_thresholds().budgets
    runs: dict[str, dict[str, Measured]] = {}
    for variant in VARIANTS:
        for run_dir in sorted((out / variant).glob(f"{variant}-*")):
            verdict = read_verdict(run_dir)
            if verdict is not None:
                runs.setdefault(variant, {})[run_dir.name] = measure(RunRecord.load(run_dir), verdict)
    base = runs.get("base", {})
    summary: dict = {"runs": {v: len(r) for v, r in runs.items()}, "trial_baselines": num_baselines, "variants": {}}
    for variant, candidates in runs.items():
        trials = []
        for name, measured in candidates.items():
            pool = [b for b in base if b != name]
            for chosen in itertools.combinations(pool, num_baselines):
                stored = {b: base[b] for b in chosen}
                trials.append(judge_regressions(name, measured, stored, budgets))
        flagged = Counter(c.metric.key for t in trials for c in t.regressions)
        summary["variants"][variant] = {
            "trials": len(trials),
            "with_a_regression": sum(bool(t.regressions) for t in trials),
            "rate": round(sum(bool(t.regressions) for t in trials) / len(trials), 3) if trials else None,
            "metrics_flagged": dict(flagged.most_common()),
        }
    summary["spread"] = _spread(base)
    return summary


def _spread(base: dict[str, Measured]) -> dict[str, dict[str, float]]:
    """Per headline metric: mean, coefficient of variation over the base runs, and repeats per side
    for a 10 % change to clear a verdict's noise."""
    z = z_quantile(VERDICT_METRICS)
    found = {}
    for key in SPREAD_METRICS:
        values = [m[key][1].value for m in base.values() if key in m]
        if len(values) < 2 or not statistics.mean(values):
            continue
        cv = statistics.stdev(values) / abs(statistics.mean(values))
        needed = 2 * (z * cv / 0.10) ** 2
        found[key] = {
            "mean": round(statistics.mean(values), 4),
            "cv": round(cv, 3),
            "repeats_for_10pct": math.ceil(needed),
        }
    return found


if __name__ == "__main__":
    sys.exit(main())
