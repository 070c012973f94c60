"""Per-request KV operations on top of the block pool: prefix hits, growth, hashing, release.

The pool knows blocks; this module knows which blocks belong to which request and how many
tokens they hold. `Request.block_ids` is written only here. A request's blocks always cover
exactly its KV tokens: `len(block_ids) == ceil(num_kv_tokens / block_tokens)` after every step.
"""

from __future__ import annotations

import numpy as np

from reference_engine.core.block_pool import BlockPool
from reference_engine.core.prefix_hash import BlockHasher
from reference_engine.executors.base import KVCompaction
from reference_engine.policies.base import EntryMeta
from reference_engine.request import Request


class KVCacheManager:
    def __init__(self, pool: BlockPool, hasher: BlockHasher, prefix_cache: bool) -> None:
        self.pool = pool
        self.hasher = hasher
        self.block_tokens = pool.block_tokens
        self.prefix_cache = prefix_cache

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_tokens)

    def new_blocks_needed(self, r: Request, num_new_tokens: int) -> int:
        """Blocks `r` lacks for `num_new_tokens` more KV tokens (called per request per plan: the
        arithmetic of `blocks_for` and `num_kv_tokens` is written out)."""
        held = r.num_computed_tokens - r.num_dropped_tokens + num_new_tokens
        return max(0, -(-held // self.block_tokens) - len(r.block_ids))

    def _num_public(self, r: Request, need: int) -> int:
        """Of `need` new blocks of `r`, those inside its declared public prefix."""
        return min(need, max(0, r.public_prefix_tokens // self.block_tokens - len(r.block_ids)))

    def update_hashes(self, r: Request) -> None:
        if self.prefix_cache and not r.approximate:
            self.hasher.extend(r)

    def take_prefix_hits(self, r: Request, now_s: float) -> int:
        """Reference the longest cached prefix of a request that holds no KV yet.

        At least one token is always left to compute (the step that computes it samples the
        next token), as in vLLM. Returns the number of tokens that hit."""
        assert not r.block_ids and r.num_computed_tokens == 0
        if not self.prefix_cache or r.approximate:
            return 0
        self.update_hashes(r)
        max_blocks = (r.num_tokens - 1) // self.block_tokens
        hits = self.pool.match_prefix(r.block_hashes[:max_blocks])
        if hits:
            self.pool.incref(hits, now_s)
            r.block_ids = hits
            r.num_registered_blocks = len(hits)
            r.num_computed_tokens = len(hits) * self.block_tokens
        return r.num_computed_tokens

    def allocate(self, r: Request, num_new_tokens: int, now_s: float) -> bool:
        """Grow `r` to hold `num_new_tokens` more tokens. False (and no change) if the pool can't.

        Blocks inside a declared public prefix belong to no tenant; all others to `r.tenant`."""
        need = self.new_blocks_needed(r, num_new_tokens)
        if need == 0:
            return True
        num_public = self._num_public(r, need) if r.public_prefix_tokens else 0
        public = self.pool.allocate(num_public, None, now_s) if num_public else []
        if public is None:
            return False
        private = self.pool.allocate(need - num_public, r.tenant, now_s)
        if private is None:
            self.pool.decref(public, now_s)
            return False
        r.block_ids.extend(public)
        r.block_ids.extend(private)
        return True

    def register_full_blocks(self, r: Request, num_computed_tokens: int | None = None) -> None:
        """Publish the hashes of blocks that became full, so later requests can hit them (full
        at `num_computed_tokens` computed tokens when given: the end of a plan's earlier step).

        Afterwards `num_registered_blocks` covers every full block, hashable or not (replay
        outputs have no tokens to hash), so the caller's cheap "did a block fill up?" check
        stays cheap. Approximate KV is never published: for an approximate request
        `num_registered_blocks` stays the exact prefix its compactions left hashed, the only
        blocks anyone else can share (what `shared_prefix_tokens` and `compact` look at)."""
        if r.approximate:
            return
        num_full = (r.num_computed_tokens if num_computed_tokens is None else num_computed_tokens) // self.block_tokens
        if self.prefix_cache:
            if r.prompt_token_ids is not None or not r.block_hashes:  # given hashes arrive whole, once
                self.update_hashes(r)
            lo, hi = r.num_registered_blocks, min(num_full, len(r.block_hashes), len(r.block_ids))
            if hi > lo:
                self.pool.register_many(r.block_ids[lo:hi], r.block_hashes[lo:hi])
                self._publish_stored(r, lo, hi)
        r.num_registered_blocks = max(r.num_registered_blocks, num_full)

    def _publish_stored(self, r: Request, lo: int, hi: int) -> None:
        """Blocks lo..hi of `r` became reusable: a BlockStored, when KV cache events are on. As
        vLLM does, a block whose content another block already held is announced too: a reader
        keeps hashes as a set."""
        events = self.pool.kv_events
        if events is None:
            return
        bt = self.block_tokens
        tokens = [] if r.prompt_token_ids is None else r.token_ids(lo * bt, hi * bt)
        events.stored(r.block_hashes[lo:hi], r.block_hashes[lo - 1] if lo else None, tokens)

    def retainable_blocks(self, r: Request) -> list[int]:
        """The leading blocks of `r` that the prefix cache can find again (what a session keeps).
        An approximate request keeps nothing: its KV is no longer an exact prefix."""
        if r.approximate:
            return []
        pool, out = self.pool, []
        for b, h in zip(r.block_ids[: r.num_registered_blocks], r.block_hashes):
            if pool.block_hash(b) != h:
                break
            out.append(b)
        return out

    def swap_in(self, r: Request, num_blocks: int, now_s: float) -> bool:
        """Give swapped-out `r` fresh blocks for the KV it brings back from host memory (copied in
        by the step's plan); False, and nothing taken, when the pool cannot give them."""
        blocks = self.pool.allocate(num_blocks, r.tenant, now_s)
        if blocks is None:
            return False
        r.block_ids = blocks
        r.num_registered_blocks = 0
        return True

    def pin(self, r: Request, num_blocks: int, now_s: float) -> bool:
        """Compute-free warm-up of a public prefix: its first `num_blocks` full blocks, hashed and
        held (never evicted) without belonging to any request; `r` only carries the tokens."""
        self.update_hashes(r)
        blocks = self.pool.allocate(num_blocks, None, now_s)
        if blocks is None:
            return False
        for b, h in zip(blocks, r.block_hashes):
            self.pool.register(b, h)
        self._publish_stored(r, 0, num_blocks)
        self.pool.incref(blocks, now_s, hold=True)
        self.pool.decref(blocks, now_s)
        return True

    def truncate(self, r: Request, num_blocks: int, now_s: float, meta: EntryMeta) -> None:
        """Keep only `r`'s first `num_blocks` blocks and the tokens they hold (a load from a lower
        tier failed: the blocks after them never received their content)."""
        dropped = r.block_ids[num_blocks:]
        if dropped:
            self.pool.decref(dropped, now_s, meta)
        r.block_ids = r.block_ids[:num_blocks]
        r.num_computed_tokens = num_blocks * self.block_tokens
        r.num_registered_blocks = min(r.num_registered_blocks, num_blocks)

    def free(self, r: Request, now_s: float, meta: EntryMeta) -> int:
        """Drop all of `r`'s references; returns blocks that left the live state."""
        if not r.block_ids:
            return 0
        released = self.pool.decref(r.block_ids, now_s, meta)
        r.block_ids = []
        r.num_registered_blocks = 0
        return released

    def leading_blocks_in(self, r: Request, blocks: list[int]) -> int:
        """How many leading blocks of `r`'s prompt are exactly `blocks` (a session's retained
        KV): the part of a new turn that reuses what its session already holds."""
        self.update_hashes(r)
        block_hash, n = self.pool.block_hash, 0
        for b, h in zip(blocks, r.block_hashes):
            if block_hash(b) != h:
                break
            n += 1
        return n

    def shared_prefix_tokens(self, r: Request) -> int:
        """KV tokens of `r` up to the end of its last block that someone else also references
        (another request's prefix hit, a session hold, a pin): a compaction must keep them in
        place. Only hashed blocks can be shared, so only `r`'s registered prefix is looked at, and
        only when the pool's sharing epoch or that prefix changed since the last answer
        (token-level policies ask for every long running request in every step)."""
        pool, registered, memo = self.pool, r.num_registered_blocks, r.shared_prefix_memo
        if memo is not None and memo[0] == pool.sharing_epoch and memo[1] == registered:
            num_shared = memo[2]
        else:
            num_shared = pool.shared_prefix_len(r.block_ids[:registered])
            r.shared_prefix_memo = (pool.sharing_epoch, registered, num_shared)
        return min(num_shared * self.block_tokens, r.num_kv_tokens)

    def compact(self, r: Request, keep: np.ndarray, now_s: float, meta: EntryMeta) -> tuple[KVCompaction | None, int]:
        """Approximate eviction: keep only the KV tokens at sorted indices `keep`, compacted to the
        front of `r`'s blocks in order; free the blocks left over. Returns the data move an
        executor must apply (None if no kept token moves) and the number of blocks released.

        The request is approximate from then on and publishes no more hashes (blocks computed
        over a compacted cache are not exact prefixes). Blocks before the first moved token keep
        their content and hashes; blocks that receive moved tokens lose theirs (`unregister`):
        no one else may read them, which `shared_prefix_tokens` guarantees. Freed blocks keep
        exact content, so hashed ones go to the cached tier as usual."""
        bt, n, kept = self.block_tokens, r.num_kv_tokens, len(keep)
        first_moved = _first_moved(keep)
        old = r.block_ids
        num_blocks = -(-kept // bt)
        pool = self.pool
        for b in old[first_moved // bt : min(num_blocks, r.num_registered_blocks)]:  # the rest: never hashed, private
            assert pool.ref_count(b) == 1, f"block {b} is shared; a compaction may not rewrite it"
            pool.unregister(b)
        r.kept_positions = r.kv_positions()[keep]
        r.num_dropped_tokens += n - kept
        r.approximate = True
        r.num_registered_blocks = min(r.num_registered_blocks, first_moved // bt)
        r.block_ids = old[:num_blocks]
        released = pool.decref(old[num_blocks:], now_s, meta)
        move = KVCompaction(r, old, keep[first_moved:], first_moved) if first_moved < kept else None
        return move, released


def _first_moved(keep: np.ndarray) -> int:
    """The first index i whose kept token moves (keep[i] != i), or len(keep) if none does. keep
    is sorted and unique, so keep[i] - i never falls: the tokens in place are a prefix, found by
    bisection in O(log kept) instead of comparing every index (compactions are frequent)."""
    kept = len(keep)
    if not kept or keep[kept - 1] == kept - 1:
        return kept
    lo, hi = 0, kept
    while lo < hi:
        mid = (lo + hi) // 2
        if keep[mid] == mid:
            lo = mid + 1
        else:
            hi = mid
    return lo
