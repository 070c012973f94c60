"""BlockPool cost per operation at 10K, 100K and 1M blocks, against a naive list-based pool;
and the prefix-cache hash per block, against sha256 as vLLM computes it.

    .venv/bin/python bench/bench_block_pool.py [--sizes 10000,100000,1000000] [--ops 20000]
    .venv/bin/python bench/bench_block_pool.py --hash-only

Operations (each timed over `--ops` blocks, reported in µs per block):
- allocate: take blocks from the free pool (a 2K-token sequence = 128 blocks per call)
- free:     release them (hashed, so they enter the cached tier)
- hit:      a prefix hit on cached blocks (they leave the cached tier: the O(n) trap of a list)
- evict:    allocate when only cached blocks are left (each allocation evicts one)

Hash: CPU µs per 16-token block for kvgate's BLAKE2b chain from a secret root
(`BlockHasher.extend` over 2K-token prompts, what the engine runs per request, block hashes as
ints included) against vLLM's default prefix-cache hash over the same blocks in the same run
(`sha256(pickle.dumps((parent_hash, tuple(token_ids), None)))` per block, the least of what vLLM
does per block). kvgate's must cost no more than vLLM's. CPU time, not wall time: on a shared
machine the wall clock also counts the waits for a core.

The naive pool keeps one Python list in LRU order, as a textbook (or nano-vllm's deque) does:
a hit removes the block from the middle of the list with `list.remove`, O(n). kvgate's cost per
block must stay flat from 10K to 1M blocks; the report prints the ratio naive / kvgate measured
in the same run, which is what a noisy machine can still compare.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pickle
import time

from reference_engine.config import TrafficClass
from reference_engine.core.block_pool import BlockPool
from reference_engine.core.prefix_hash import BlockHasher, stable_id
from reference_engine.request import Request
from reference_engine.policies.base import LruIndex

SEQ_BLOCKS = 128  # a 2K-token sequence in 16-token blocks


class NaiveBlockPool:
    """Free and cached blocks in one list, LRU first; a prefix hit is `list.remove` (O(n))."""

    def __init__(self, num_blocks: int) -> None:
        self.free = list(range(num_blocks))
        self.ref = [0] * num_blocks
        self.hash_to_block: dict[int, int] = {}
        self.block_hash: list[int | None] = [None] * num_blocks

    def allocate(self, n: int) -> list[int]:
        blocks = self.free[:n]
        del self.free[:n]
        for b in blocks:
            h = self.block_hash[b]
            if h is not None:
                del self.hash_to_block[h]
                self.block_hash[b] = None
            self.ref[b] = 1
        return blocks

    def register(self, b: int, h: int) -> None:
        self.block_hash[b] = h
        self.hash_to_block[h] = b

    def free_blocks(self, blocks: list[int]) -> None:
        for b in blocks:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.free.append(b)

    def hit(self, hashes: list[int]) -> list[int]:
        out = []
        for h in hashes:
            b = self.hash_to_block[h]
            if self.ref[b] == 0:
                self.free.remove(b)  # O(n): the trap
            self.ref[b] += 1
            out.append(b)
        return out


def _timed(fn, clock=time.perf_counter) -> float:
    """Time of `fn()` on `clock` (wall time by default) with the cyclic GC off, as `timeit` does:
    a gen-2 collection walks every live container, which would charge the pool for the
    benchmark's own garbage."""
    gc.disable()
    try:
        t = clock()
        fn()
        return clock() - t
    finally:
        gc.enable()


def bench_kvgate(num_blocks: int, ops: int) -> dict[str, float]:
    pool = BlockPool(num_blocks, 16, LruIndex())
    calls = ops // SEQ_BLOCKS
    seqs: list[list[int]] = []
    res = {"allocate": _timed(lambda: seqs.extend(pool.allocate(SEQ_BLOCKS, "t", 0.0) for _ in range(calls)))}
    for i, seq in enumerate(seqs):
        for j, b in enumerate(seq):
            pool.register(b, i * SEQ_BLOCKS + j)
    res["free"] = _timed(lambda: [pool.decref(seq, 1.0) for seq in seqs])
    hashes = [[i * SEQ_BLOCKS + j for j in range(SEQ_BLOCKS)] for i in range(calls)]
    res["hit"] = _timed(lambda: [pool.incref(pool.match_prefix(h), 2.0) for h in hashes])
    for seq in seqs:
        pool.decref(seq, 3.0)
    rest = pool.allocate(pool.num_free, "t", 4.0)  # now only cached blocks remain
    res["evict"] = _timed(lambda: [pool.allocate(SEQ_BLOCKS, "t", 5.0) for _ in range(calls)])
    assert rest is not None and pool.num_evicted_cached == calls * SEQ_BLOCKS
    return {k: v / (calls * SEQ_BLOCKS) * 1e6 for k, v in res.items()}


def bench_naive(num_blocks: int, ops: int) -> dict[str, float]:
    pool = NaiveBlockPool(num_blocks)
    calls = ops // SEQ_BLOCKS
    seqs: list[list[int]] = []
    res = {"allocate": _timed(lambda: seqs.extend(pool.allocate(SEQ_BLOCKS) for _ in range(calls)))}
    for i, seq in enumerate(seqs):
        for j, b in enumerate(seq):
            pool.register(b, i * SEQ_BLOCKS + j)
    res["free"] = _timed(lambda: [pool.free_blocks(seq) for seq in seqs])
    hashes = [[i * SEQ_BLOCKS + j for j in range(SEQ_BLOCKS)] for i in range(calls)]
    res["hit"] = _timed(lambda: [pool.hit(h) for h in hashes])
    for seq in seqs:
        pool.free_blocks(seq)
    pool.allocate(len(pool.free) - calls * SEQ_BLOCKS)
    res["evict"] = _timed(lambda: [pool.allocate(SEQ_BLOCKS) for _ in range(calls)])
    return {k: v / (calls * SEQ_BLOCKS) * 1e6 for k, v in res.items()}


def _hash_request(tokens: list[int]) -> Request:
    return Request(request_id="bench", tenant="t", traffic_class=TrafficClass.INTERACTIVE,
                   num_prompt_tokens=len(tokens), max_new_tokens=1, arrival_s=0.0, prompt_token_ids=tokens,
                   hash_scope=stable_id("tenant:t"))


def bench_hash(num_prompts: int, prompt_tokens: int, block_tokens: int = 16) -> dict[str, float]:
    """CPU µs per block: kvgate's chain and vLLM's hash, over the same prompts."""
    prompts = [[(p * 7919 + i) % 128_000 for i in range(prompt_tokens)] for p in range(num_prompts)]
    hasher = BlockHasher(block_tokens, "bench-model")
    num_blocks = num_prompts * (prompt_tokens // block_tokens)
    requests = [_hash_request(tokens) for tokens in prompts]

    def vllm_sha256() -> None:
        for tokens in prompts:
            parent = b"\0" * 32
            for lo in range(0, prompt_tokens - block_tokens + 1, block_tokens):
                parent = hashlib.sha256(pickle.dumps((parent, tuple(tokens[lo:lo + block_tokens]), None),
                                                     protocol=pickle.HIGHEST_PROTOCOL)).digest()

    times = {"kvgate": _timed(lambda: [hasher.extend(r) for r in requests], time.process_time),
             "vllm_sha256": _timed(vllm_sha256, time.process_time)}
    assert all(len(r.block_hashes) == prompt_tokens // block_tokens for r in requests)
    return {k: v / num_blocks * 1e6 for k, v in times.items()}


def _best_of(repeat: int, fn) -> dict[str, float]:
    """Per-kind minimum over `repeat` runs: the least disturbed measurement, as timeit advises."""
    runs = [fn() for _ in range(repeat)]
    return {k: min(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--ops", type=int, default=4_096, help="blocks per operation kind (a multiple of 128)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the minimum is reported")
    ap.add_argument("--naive-max", type=int, default=100_000, help="skip the naive pool above this size (it is O(n))")
    ap.add_argument("--hash-only", action="store_true", help="only the prefix-cache hash comparison")
    args = ap.parse_args()
    h = _best_of(args.repeat, lambda: bench_hash(64, 2048))
    print(f"prefix hash, CPU µs per 16-token block: kvgate (blake2b chain) {h['kvgate']:.2f} | vLLM sha256(pickle) "
          f"{h['vllm_sha256']:.2f} ({h['vllm_sha256'] / h['kvgate']:.2f}× kvgate)")
    if args.hash_only:
        return
    kinds = ("allocate", "free", "hit", "evict")
    print(f"{'blocks':>9} | " + " | ".join(f"{k:>16}" for k in kinds) + "   (µs per block: kvgate / naive = ratio)")
    base = None
    for n in (int(s) for s in args.sizes.split(",")):
        ops = min(args.ops, n // 2 // SEQ_BLOCKS * SEQ_BLOCKS)  # leave room to fill the rest for `evict`
        ours = _best_of(args.repeat, lambda: bench_kvgate(n, ops))
        naive = _best_of(args.repeat, lambda: bench_naive(n, ops)) if n <= args.naive_max else None
        base = base or ours
        cells = []
        for k in kinds:
            cell = f"{ours[k]:.3f}"
            if naive:
                cell += f"/{naive[k]:.2f}={naive[k] / ours[k]:.0f}x"
            cells.append(f"{cell:>16}")
        print(f"{n:>9} | " + " | ".join(cells))
    print("flatness (cost at the largest size / cost at the smallest):",
          ", ".join(f"{k} {ours[k] / base[k]:.2f}" for k in kinds))


if __name__ == "__main__":
    main()
