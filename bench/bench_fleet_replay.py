"""Routing a fleet on the shared conversation trace: the fleet prefix-hit ratio of four replicas
routed `prefix_aware`, `round_robin` and `least_loaded`, against one pooled cache of the same
total size (docs/benchmarks.md, "Routing a fleet").

    .venv/bin/python bench/bench_fleet_replay.py                    # the whole trace at 0.6x its rate
    .venv/bin/python bench/bench_fleet_replay.py --limit 2000       # its first 2,000 requests

Replays `configs/default.toml` (lru; Llama-3.1-8B on one H100 per replica) through
harness/replay/fleet.py: N engine cores on virtual clocks, the routing policy of the live router
over an index fed by their KV cache events. `pooled` is one engine whose pool holds the N
replicas' blocks together (one GPU's compute: hence the rate one GPU can serve). The goal: a
prefix-aware fleet within 10 % of the pooled cache's ratio (`vs pooled` column). `hit ratio` divides
by the prompts the engines took, as the gates do; `of offered` by every prompt sent, a request
refused on arrival (a tenant at its cap on its replica) counting as a miss.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.replay.fleet import replay_fleet  # noqa: E402
from harness.replay.loaders import load_trace  # noqa: E402
from reference_engine import load_config  # noqa: E402

DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "mooncake_fast25" / "conversation_trace.jsonl"
VARIANTS = (("pooled", "round_robin", True), *((r, r, False) for r in ("prefix_aware", "round_robin", "least_loaded")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    p.add_argument("--config", type=Path, default=REPO / "configs" / "default.toml")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rate-scale", type=float, default=0.6)
    p.add_argument("--limit", type=int, default=None)
    args = p.parse_args()
    trace = load_trace(args.trace, limit=args.limit)
    config = load_config(args.config)
    print(f"{len(trace.requests)} requests of {args.trace.name} at {args.rate_scale}x, {args.workers} replicas")
    print(
        f"{'routing':<14}{'hit ratio':>10}{'vs pooled':>11}{'of offered':>12}{'refused':>9}  requests per replica"
        f"{'':>12}wall"
    )
    pooled_ratio = None
    for name, routing, pooled in VARIANTS:
        t0 = time.perf_counter()
        r = replay_fleet(
            trace, config, num_workers=args.workers, routing=routing, rate_scale=args.rate_scale, pooled=pooled
        )
        wall_s = time.perf_counter() - t0
        pooled_ratio = r.hit_ratio if pooled else pooled_ratio
        versus = f"{r.hit_ratio / pooled_ratio:.2f}x" if pooled_ratio else "-"
        spread = "/".join(map(str, r.requests_by_worker))
        print(
            f"{name:<14}{r.hit_ratio:>10.3f}{versus:>11}{r.offered_hit_ratio:>12.3f}{r.num_refused:>9}  "
            f"{spread:<32}{wall_s:.0f} s"
        )


if __name__ == "__main__":
    main()
