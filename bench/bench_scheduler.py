"""Scheduler step time with N running sequences (default 512): the engine's per-step overhead.

    .venv/bin/python bench/bench_scheduler.py [--seqs 512] [--steps 200]

Fills an engine with N decoding sequences (large pool, no pressure), then times `step()` —
schedule + sim execute + update — over many decode steps, and the same with a baseline of 1
sequence in the same run, so the report shows both the absolute cost per step (target ≤ 1 ms
at 512 sequences on a 2-core machine) and the marginal cost per sequence.
"""

from __future__ import annotations

import argparse
import gc
import time

from record.query import percentile
from reference_engine import EngineConfig, EngineCore, VirtualClock, with_overrides


def engine_with(num_seqs: int) -> tuple[EngineCore, VirtualClock]:
    cfg = with_overrides(
        EngineConfig(),
        {
            "hardware.gpu": "h200",
            "engine.max_num_seqs": max(num_seqs, 1),
            "engine.max_num_batched_tokens": 8192,
            "tenants": {"t": {"api_keys": ["k"], "max_kv_share": 1.0, "max_active_seqs": 100_000}},
        },
    )
    clock = VirtualClock()
    core = EngineCore(cfg, clock=clock)
    for i in range(num_seqs):
        core.add_request(tenant="t", prompt_token_ids=[100_000 * i + j for j in range(64)], max_new_tokens=1000)
    while core.scheduler.prefilling or len(core.scheduler.waiting):  # get every sequence decoding
        clock.advance_to(core.step().t_end_s)
    return core, clock


def time_steps(num_seqs: int, steps: int) -> list[float]:
    core, clock = engine_with(num_seqs)
    assert len(core.scheduler.running) == num_seqs
    samples = []
    gc.disable()
    try:
        for _ in range(steps):
            t = time.perf_counter()
            out = core.step()
            samples.append(time.perf_counter() - t)
            clock.advance_to(out.t_end_s)
    finally:
        gc.enable()
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    base = time_steps(1, args.steps)
    big = time_steps(args.seqs, args.steps)
    b50, s50, s95 = percentile(base, 50) * 1e3, percentile(big, 50) * 1e3, percentile(big, 95) * 1e3
    print(f"step with 1 sequence:        P50 {b50:.3f} ms")
    print(f"step with {args.seqs} sequences:    P50 {s50:.3f} ms, P95 {s95:.3f} ms  (target <= 1 ms)")
    print(
        f"marginal cost per sequence:  {(s50 - b50) / (args.seqs - 1) * 1e3:.2f} µs;  "
        f"ratio {s50 / b50:.0f}x the 1-sequence step"
    )


if __name__ == "__main__":
    main()
