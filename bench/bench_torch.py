"""Torch executor benchmark: a batch of requests through the engine on a real model, measured.

    .venv/bin/python bench/bench_torch.py                                   # kvgate-tiny, fp32, CPU
    .venv/bin/python bench/bench_torch.py --device cuda --model kvgate-small --dtype bf16 --requests 64

Every request has the same prompt length and output budget; all arrive at once and run under
continuous batching with measured step times. Reports the pool (planned bytes, the tensor's
bytes, and on CUDA what the allocator handed out), wall time, prefill and decode throughput,
step-time percentiles, and — with `--paged-vs-dense` — how long a dense recompute of one
sequence takes next to the paged decode that avoids it. Timings are wall-clock: on a shared
machine compare ratios and rerun when the load is high.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from record.query import percentile  # noqa: E402
from reference_engine import EngineConfig, EngineCore, VirtualClock, with_overrides  # noqa: E402
from reference_engine.catalog import DType, get_model  # noqa: E402
from reference_engine.memory import GIB  # noqa: E402


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="kvgate-tiny")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--prompt", type=int, default=256, help="prompt tokens per request")
    p.add_argument("--new", type=int, default=64, help="output tokens per request")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--paged-vs-dense", action="store_true")
    return p.parse_args()


def _config(args: argparse.Namespace) -> EngineConfig:
    bt = 16
    per_request = -(-(args.prompt + args.new) // bt)
    num_blocks = args.requests * per_request * 2  # room to spare: no preemption in this benchmark
    bytes_per_block = get_model(args.model).kv_bytes_per_token(DType(args.dtype)) * bt
    return with_overrides(
        EngineConfig(),
        {
            "model.name": args.model,
            "model.weight_dtype": args.dtype,
            "model.kv_dtype": args.dtype,
            "engine.executor": "torch",
            "torch.device": args.device,
            "torch.timing": "measured",
            "torch.cpu_threads": args.threads,
            "hardware.kv_pool_gib": (num_blocks + 0.5) * bytes_per_block / GIB,
            "engine.max_num_seqs": args.requests,
            "engine.max_num_batched_tokens": 2048,
            "admission.enabled": False,
            "prefix_cache.enabled": False,
            "prefix_cache.public_prefixes": [],
            "tenants": {"bench": {"api_keys": ["sk-bench"], "max_kv_share": 1.0, "max_active_seqs": args.requests}},
            "kv_cache.policy": "none",
        },
    )


def main() -> None:
    args = _parse()
    core = EngineCore(_config(args), clock=VirtualClock())
    ex = core.executor
    planned = core.memory.num_blocks * core.memory.bytes_per_block
    print(
        f"{args.model} {args.dtype} on {args.device}: pool {core.memory.num_blocks} blocks, planned "
        f"{planned / 2**20:.2f} MiB, tensor {ex.pool_bytes / 2**20:.2f} MiB, "
        f"allocated {ex.allocated_pool_bytes / 2**20:.2f} MiB"
    )
    rng = random.Random(0)
    for _ in range(args.requests):
        core.add_request(
            tenant="bench",
            prompt_token_ids=[rng.randrange(5, 4096) for _ in range(args.prompt)],
            max_new_tokens=args.new,
        )
    prefill_s, decode_s = [], []
    t0 = time.perf_counter()
    while core.has_work():
        out = core.step()
        core.clock.advance_to(out.t_end_s)
        step_s = out.t_end_s - out.t_start_s
        (decode_s if out.num_scheduled_tokens == len(out.outputs) else prefill_s).append(step_s)
    wall = time.perf_counter() - t0
    n_prompt, n_out = args.requests * args.prompt, args.requests * args.new
    print(
        f"wall {wall:.2f} s for {args.requests} requests: prefill {n_prompt / sum(prefill_s):,.0f} tok/s over "
        f"{len(prefill_s)} steps, decode {n_out / (sum(decode_s) + 1e-12):,.0f} tok/s over {len(decode_s)} steps"
    )
    if decode_s:
        print(
            f"decode step ms: p50 {percentile(decode_s, 50) * 1e3:.2f}, p95 {percentile(decode_s, 95) * 1e3:.2f} "
            f"(batch {args.requests}, context {args.prompt}..{args.prompt + args.new})"
        )
    if args.paged_vs_dense:
        _paged_vs_dense(ex, args.prompt + args.new)


def _paged_vs_dense(ex, length: int) -> None:
    from reference_engine.divergence import dense_logits

    ids = list(range(5, 5 + length))
    dense_logits(ex, ids)
    t = time.perf_counter()
    dense_logits(ex, ids)
    print(
        f"dense recompute of one {length}-token sequence: {(time.perf_counter() - t) * 1e3:.2f} ms "
        f"(what each decode step would cost without a KV cache)"
    )


if __name__ == "__main__":
    main()
