"""KV tiers on the shared conversation trace: the prefix-hit token ratio by tier behind one
simulated H100 (docs/policies.md, "KV tiers: offload or re-prefill").

    .venv/bin/python bench/bench_tiers.py                       # the whole trace at 0.6x its rate
    .venv/bin/python bench/bench_tiers.py --limit 2000          # its first 2,000 requests

Replays `configs/tiered.toml` (lru; Llama-3.1-8B bf16 KV, 128 KiB per token, on one H100) with
the GPU pool alone (`gpu`), a 512 GiB host tier (`host`, 4.2M tokens), 512 GiB host + 4 TiB disk
(`host+disk`, 38M tokens) on one NVMe drive, and on four striped (`host+disk4`). Prints, side by
side: the hit ratio by tier (prompt tokens served by the GPU
pool, loaded from host, from disk), TTFT P50 / P95, goodput, requests answered, and the blocks
and bytes each tier took in and gave back, with its loads that fell back to recompute.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.replay.loaders import load_trace  # noqa: E402
from harness.replay.run import ReplaySettings, run_replay  # noqa: E402
from harness.replay.summary import ReplaySummary  # noqa: E402
from record.run_record import RunRecord  # noqa: E402
from reference_engine import load_config, with_overrides  # noqa: E402
from reference_engine.memory import MemoryPlan  # noqa: E402

DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "mooncake_fast25" / "conversation_trace.jsonl"
# one Gen4 NVMe drive: the config's defaults (6 GB/s read, 3 GB/s write); four striped: 4x both
STRIPED = {"tiers.disk_read_gbps": 24.0, "tiers.disk_write_gbps": 12.0}
SETUPS: dict[str, dict[str, float]] = {
    "gpu": {"tiers.host_gib": 0.0},
    "host": {"tiers.host_gib": 512.0},
    "host+disk": {"tiers.host_gib": 512.0, "tiers.disk_gib": 4096.0},
    "host+disk4": {"tiers.host_gib": 512.0, "tiers.disk_gib": 4096.0, **STRIPED},
}


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    p.add_argument("--config", type=Path, default=REPO / "configs" / "tiered.toml")
    p.add_argument("--limit", type=int, default=None, help="first N requests only")
    p.add_argument("--rate-scale", type=float, default=0.6, help="0.6: below the simulated H100's prefill ceiling")
    p.add_argument("--setup", action="append", choices=sorted(SETUPS), help="default: every setup, in order")
    return p.parse_args()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def main() -> None:
    args = _parse()
    trace = load_trace(args.trace, limit=args.limit)
    base = load_config(args.config)
    print(f"{args.trace.name}: {len(trace.requests)} requests, rate x{args.rate_scale}, config {args.config.name}")
    print("| setup | hit ratio | gpu | host | disk | TTFT P50 / P95 ms | goodput req/s | ok | tiers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.setup or SETUPS:
        config = with_overrides(base, SETUPS[name])
        with tempfile.TemporaryDirectory() as tmp:
            result = run_replay(trace, config, ReplaySettings(rate_scale=args.rate_scale), Path(tmp) / "run")
            record = RunRecord.load(result.run_dir)
            s = ReplaySummary.from_record(record)
            tiers = record.meta.final.get("tiers", {})
        by, block_bytes = s.hit_rate_by_tier or {}, MemoryPlan.from_config(config).bytes_per_block
        ttft = "-" if s.ttft_p50_s is None else f"{s.ttft_p50_s * 1000:,.0f} / {(s.ttft_p95_s or 0) * 1000:,.0f}"
        moved = "; ".join(
            f"{t}: {c['demoted']:,} in, {c['promoted']:,} loaded ({c['promoted'] * block_bytes / 1e12:.2f} TB), "
            f"{c['slower']:,} slower, {c['write_dropped']:,} write-dropped"
            for t, c in tiers.items()
        )
        print(
            f"| {name} | {_pct(s.hit_rate)} | {_pct(by.get('gpu'))} | {_pct(by.get('host'))} | {_pct(by.get('disk'))} "
            f"| {ttft} | {s.goodput_rps or 0:.2f} | {s.num_ok:,} / {s.num_requests:,} | {moved or '-'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
