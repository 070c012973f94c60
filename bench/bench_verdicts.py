"""Verdict stability: the same matrix run N times; a gate whose outcome differs between runs of the
same config is a flip.

    .venv/bin/python bench/bench_verdicts.py                          # every config, 10 runs each
    .venv/bin/python bench/bench_verdicts.py --repeat 3 --configs configs/default.toml
    .venv/bin/python bench/bench_verdicts.py --read runs/verdicts     # summarise a finished one again

Targets: 0 flips on default and every candidate under `--profile quick`; the
baselines fail the same gates in every run; every run crosses the evict and preempt rungs and
measures preempted_complete. The matrix is `kvgate matrix --repeat N` (one engine per run, the
runs one after the other), so what is measured is exactly what CI and users run. Ten runs of
eight configs take about an hour on two cores. The summary is printed and written as
`<out>/stability.json`.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from record.pressure import MUST_REACH  # noqa: E402
from record.run_record import RunRecord  # noqa: E402

KVGATE = Path(sys.executable).with_name("kvgate")


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10, help="runs per config (default 10)")
    p.add_argument("--configs", nargs="+", default=sorted(glob.glob(str(REPO / "configs" / "*.toml"))))
    p.add_argument("--baselines", nargs="*", default=sorted(glob.glob(str(REPO / "configs" / "baselines" / "*.toml"))))
    p.add_argument("--profile", default="quick")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "verdicts")
    p.add_argument("--read", type=Path, metavar="DIR", help="summarise the matrix already under DIR; run nothing")
    return p.parse_args()


def main() -> int:
    args = _parse()
    out = args.read or args.out
    if args.read is None:
        cmd = [
            str(KVGATE),
            "matrix",
            *args.configs,
            "--baseline",
            *args.baselines,
            "--profile",
            args.profile,
            "--repeat",
            str(args.repeat),
            "--out",
            str(out),
        ]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=False)  # exit 1 (a gate failed) is a result here, not an error
    summary = summarise(out)
    (out / "stability.json").write_text(json.dumps(summary, indent=2))
    _print(summary)
    return 0


def summarise(out: Path) -> dict:
    """Per config: its runs' outcomes per gate, the gates that flipped, and the pressure reached."""
    configs: dict[str, dict] = {}
    for meta_path in sorted(out.glob("**/meta.json")):
        run_dir = meta_path.parent
        verdict_path = run_dir / "verdict.json"
        if not verdict_path.exists():
            continue
        record = RunRecord.load(run_dir)
        name = run_dir.parent.name if run_dir.parent != out else run_dir.name
        entry = configs.setdefault(name, {"runs": 0, "outcomes": {}, "reached": Counter(), "preempted_measured": 0})
        entry["runs"] += 1
        for result in json.loads(verdict_path.read_text())["results"]:
            entry["outcomes"].setdefault(result["gate"], Counter())[result["outcome"]] += 1
            if result["gate"] == "preempted_complete" and result["outcome"] != "not_measurable":
                entry["preempted_measured"] += 1
        pressure = record.meta.pressure
        for rung in MUST_REACH:
            entry["reached"][rung] += bool(pressure and pressure.reached(rung))
    for entry in configs.values():
        entry["flips"] = sorted(gate for gate, seen in entry["outcomes"].items() if len(seen) > 1)
        entry["outcomes"] = {gate: dict(seen) for gate, seen in entry["outcomes"].items()}
        entry["reached"] = dict(entry["reached"])
    return configs


def _print(summary: dict) -> None:
    total_flips = 0
    for name, entry in summary.items():
        runs = entry["runs"]
        failing = {g: s.get("fail", 0) for g, s in entry["outcomes"].items() if s.get("fail")}
        reached = ", ".join(f"{rung} {entry['reached'].get(rung, 0)}/{runs}" for rung in MUST_REACH)
        print(
            f"{name:>16}: {runs} runs; flips: {', '.join(entry['flips']) or 'none'}; "
            f"failed: {', '.join(f'{g} {n}/{runs}' for g, n in failing.items()) or 'none'}; "
            f"reached {reached}; preempted_complete measured {entry['preempted_measured']}/{runs}"
        )
        total_flips += len(entry["flips"])
    print(f"verdict flips in all: {total_flips} (target 0)")


if __name__ == "__main__":
    raise SystemExit(main())
