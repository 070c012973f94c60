"""Torch executor tiers: bytes/s of a block round trip through host memory and through disk.

    .venv/bin/python bench/bench_torch_tiers.py                      # kvgate-small bf16 on CPU
    .venv/bin/python bench/bench_torch_tiers.py --device cuda --blocks 512

A round trip is what the engine asks of `TierStore`: demote `--blocks` device blocks by key
(one `TierTransfer` out of the pool), then promote them into other block ids; for disk, each
block is a file written atomically with a SHA-256 checksum, and read back and checked. The
baseline, in the same run, is one plain tensor copy of the same bytes there and back
(`torch.Tensor.copy_` to a preallocated host tensor). Reports GiB/s of KV moved (bytes counted
once per direction) and the ratio to the baseline. The disk figure is what the page cache and
the filesystem under `--dir` give (usually memory, not the device): a bound for this code, not
a disk measurement. Timings are wall-clock, best of `--repeats` runs interleaved with the
baseline: on a shared machine compare the ratios and rerun under load.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reference_engine.catalog import DType, get_model  # noqa: E402
from reference_engine.executors.base import Tier, TierTransfer  # noqa: E402

GIB = 2**30


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="kvgate-small")
    p.add_argument("--dtype", default="bf16", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--block-tokens", type=int, default=16)
    p.add_argument("--blocks", type=int, default=64, help="blocks per round trip")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--dir", default=None, help="parent of the disk tier's directory (default: system temp)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return p.parse_args()


def _timed_s(run: Callable[[], None], sync: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    run()
    sync()
    return time.perf_counter() - t0


def main() -> None:
    args = _parse()
    # torch is the optional extra: imported here, so that --help works without it
    import torch

    from reference_engine.executors.torch_executor import TORCH_DTYPES
    from reference_engine.executors.torch_kv import PagedKVCache
    from reference_engine.executors.torch_tiers import TierStore

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    spec = get_model(args.model)
    n = args.blocks
    cache = PagedKVCache(
        num_layers=spec.num_layers,
        num_blocks=2 * n,
        block_tokens=args.block_tokens,
        num_kv_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        dtype=TORCH_DTYPES[DType(args.dtype)],
        device=device,
    )
    cache.data.copy_(torch.randn(cache.data.shape))
    store = TierStore(cache, disk_parent=args.dir)
    keys, first, second = list(range(n)), list(range(n)), list(range(n, 2 * n))
    num_bytes = n * store.block_bytes
    host = torch.empty_like(cache.data[:, :, :n], device="cpu", pin_memory=device.type == "cuda")

    def plain() -> None:
        host.copy_(cache.data[:, :, :n], non_blocking=True)
        cache.data[:, :, n:].copy_(host, non_blocking=True)

    def round_trip(tier: Tier) -> Callable[[], None]:
        def run() -> None:
            store.apply_outbound([TierTransfer(Tier.GPU, tier, keys, first, num_bytes)], [])
            store.apply_promotions([TierTransfer(tier, Tier.GPU, keys, second, num_bytes)])

        return run

    runs = {"plain tensor copy": plain, "host tier": round_trip(Tier.HOST), "disk tier": round_trip(Tier.DISK)}
    best = dict.fromkeys(runs, float("inf"))
    before = cache.data[:, :, :n].clone()
    for _ in range(args.repeats):  # interleaved, so a burst of load hits every kind alike
        for name, run in runs.items():
            best[name] = min(best[name], _timed_s(run, sync))
            assert torch.equal(cache.data[:, :, n:], before), f"{name}: the round trip changed a byte"
            cache.data[:, :, n:].zero_()
    print(
        f"{args.model} {args.dtype} on {device}: {n} blocks × {store.block_bytes / 2**10:.0f} KiB = "
        f"{num_bytes / 2**20:.1f} MiB each way, best of {args.repeats} interleaved"
    )
    baseline = best["plain tensor copy"]
    for name, t in best.items():
        print(f"  {name + ' round trip:':<30} {2 * num_bytes / t / GIB:6.2f} GiB/s = {baseline / t:.2f} × plain copy")
    store.close()


if __name__ == "__main__":
    main()
