"""P/D against one pool on the shared conversation trace: TTFT, time per output token and the
prefix-hit ratio of a disaggregated prefill/decode pair (configs/pd.toml) beside one engine
whose pool is the pair's two pools together (docs/pd.md, "P/D against one pool").

    .venv/bin/python bench/bench_pd_replay.py                       # the trace's first 2,000 requests
    .venv/bin/python bench/bench_pd_replay.py --limit 0 --rate-scale 0.5

The pair replays through harness/replay/pd.py, the pool through harness/replay/run.py: the same
engine code, tenants and trace, each into a run record. TTFT and TPOT are the client's view
(requests.csv) of the requests that were answered; TPOT is (done - first token) / (tokens - 1).
The hit ratio is of prompt tokens on the side that computes prompts (the pair's prefill side; a
decode-side hit of a pulled block is not a saved prefill). The pair has two GPUs' compute, the
pool one: what the comparison shows is what disaggregation buys and costs, not a same-hardware
race.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from harness.replay.loaders import load_trace  # noqa: E402
from harness.replay.pd import run_pd_replay  # noqa: E402
from harness.replay.run import ReplaySettings, run_replay  # noqa: E402
from record.fleet import replica_view  # noqa: E402
from record.query import measured_hit_ratio, percentile  # noqa: E402
from record.run_record import RunRecord  # noqa: E402
from reference_engine import load_config, with_overrides  # noqa: E402

DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "mooncake_fast25" / "conversation_trace.jsonl"


def figures(record: RunRecord, hit_view: RunRecord) -> dict[str, float | None]:
    r = record.requests
    ok = r[r["status"] == "ok"]
    decoded = ok[ok["completion_tokens"] > 1]
    tpot = (decoded["done_s"] - decoded["first_token_s"]) / (decoded["completion_tokens"] - 1)
    return {
        "answered": float(len(ok)),
        "refused": float((r["status"] == "error").sum()),
        "ttft_p50_ms": 1e3 * percentile(ok["ttft_s"], 50),
        "ttft_p95_ms": 1e3 * percentile(ok["ttft_s"], 95),
        "tpot_p50_ms": 1e3 * percentile(tpot, 50),
        "tpot_p95_ms": 1e3 * percentile(tpot, 95),
        "hit_ratio": measured_hit_ratio(hit_view),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    p.add_argument("--config", type=Path, default=REPO / "configs" / "pd.toml")
    p.add_argument("--side-gib", type=float, default=24.0, help="each side's KV pool (the one pool: both)")
    p.add_argument("--rate-scale", type=float, default=1.0)
    p.add_argument("--limit", type=int, default=2000, help="first N requests (0: all)")
    args = p.parse_args()
    trace = load_trace(args.trace, limit=args.limit or None)
    pd_config = with_overrides(load_config(args.config), {"hardware.kv_pool_gib": args.side_gib})
    settings = ReplaySettings(rate_scale=args.rate_scale)
    out = Path(tempfile.mkdtemp(prefix="bench-pd-"))
    pair = run_pd_replay(trace, pd_config, settings, out / "pd", config_path=str(args.config))
    pair_record = RunRecord.load(pair.run_dir)
    both = pair_record.meta.pool
    assert both is not None
    pool_gib = both.num_blocks * both.bytes_per_block / 2**30  # the pair's two pools together
    one = with_overrides(pd_config, {"pd.enabled": False, "hardware.kv_pool_gib": pool_gib})
    pool = run_replay(trace, one, settings, out / "pool", config_path=f"{args.config} as one {pool_gib:g} GiB pool")
    pool_record = RunRecord.load(pool.run_dir)
    rows = {
        f"P/D pair ({pool_gib / 2:g} + {pool_gib / 2:g} GiB)": figures(
            pair_record, replica_view(pair_record, "prefill")
        ),
        f"one pool ({pool_gib:g} GiB)": figures(pool_record, pool_record),
    }
    print(f"{len(trace.requests)} requests of {args.trace.name} at {args.rate_scale}x rate; records under {out}")
    print(pd.DataFrame(rows).T.to_string(float_format=lambda v: f"{v:,.3f}"))
    moved = pair_record.meta.final["pd"]
    print(
        f"pair: {moved['num_transfers']} transfers, {moved['bytes_moved'] / 2**30:,.1f} GiB over the link, "
        f"{moved['num_failed']} failed, {moved['num_timed_out']} timed out"
    )


if __name__ == "__main__":
    main()
