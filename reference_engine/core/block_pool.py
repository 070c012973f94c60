"""The paged KV block pool: refcounts, the prefix-hash index, and live/cached/free accounting.

Every block is in exactly one state:

    free     ref == 0, no hash   on the free stack
    cached   ref == 0, hashed    in the cached-tier `EvictionIndex` and in `_hash_to_block`
    live     ref  > 0            held by running requests and/or retained state (sessions, pins)

so `num_live + num_cached + num_free == num_blocks` always. A live block whose every reference
is a *hold* (a session or a pin, not a running request) is also counted as `num_retained`.

Why these structures: the free stack is a Python list (pop/extend O(1), C speed, LIFO for
locality); the cached tier is the policy's index, whose every operation is O(1) or O(log n) —
for LRU a C `OrderedDict`, the equivalent of vLLM v1's doubly-linked free-block queue. Nothing
here calls `list.remove` or scans: allocate, free and prefix hits cost O(blocks touched).

Only the pool changes refcounts, hashes and block tenants. An allocation it cannot serve
returns None and is counted (`num_alloc_failures`); the engine turns that into an OOM event
and survives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress, count
from operator import gt
from typing import cast

from reference_engine.core.kv_events import KvEventLog
from reference_engine.policies.base import EntryMeta, EvictionIndex


class BlockPool:
    def __init__(self, num_blocks: int, block_tokens: int, cached_index: EvictionIndex[int]) -> None:
        if num_blocks < 1:
            raise ValueError("a pool needs at least one block")
        self.num_blocks = num_blocks
        self.block_tokens = block_tokens
        self._ref = [0] * num_blocks
        self._hold = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._tenant: list[str | None] = [None] * num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        self._held: set[int] = set()  # blocks with a hold: decref takes its slow path only for them
        self._hash_to_block: dict[int, int] = {}
        self._cached = cached_index
        self.num_live = 0
        self.num_retained = 0
        self.live_by_tenant: dict[str | None, int] = {}
        self.num_alloc_failures = 0
        self.num_evicted_cached = 0
        # Told (keys, tenants, block ids, time) of the cached blocks it evicts, before their
        # content is reused: the KV tiers below demote them there (core/tiers.py).
        self.on_evict: Callable[[list[int], list[str | None], list[int], float], None] | None = None
        # Told the hashes of blocks that stop being reusable (evicted, unregistered) when KV cache
        # events are on; the KV manager writes the stored ones, whose tokens it knows.
        self.kv_events: KvEventLog | None = None
        self.num_prefix_queries = 0  # blocks looked up
        self.num_prefix_hits = 0  # blocks found
        self.num_external_hits = 0  # blocks found that a KV transfer had just filled (`count_as_external`)
        # Changes whenever a block may gain or lose a second reference: every incref, every
        # decref off its all-ones path. Between two changes the blocks with refcount > 1 stay
        # the same (an allocation gives refcount 1, the all-ones path takes 1 to 0), so an
        # answer of `shared_prefix_len` may be kept until it changes.
        self.sharing_epoch = 0

    # ----------------------------------------------------------------- queries
    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_cached(self) -> int:
        return len(self._cached)

    @property
    def evictions_depend_on_time(self) -> bool:
        """Whether the cached blocks an allocation evicts, or what is done with them, depend on
        when it asks: the index demotes by age, or a tier below takes them in at that time."""
        return self.on_evict is not None or self._cached.victims_depend_on_time

    @property
    def num_allocatable(self) -> int:
        return len(self._free) + len(self._cached)

    def ref_count(self, block: int) -> int:
        return self._ref[block]

    def hold_count(self, block: int) -> int:
        return self._hold[block]

    def block_hash(self, block: int) -> int | None:
        return self._hash[block]

    def block_tenant(self, block: int) -> str | None:
        return self._tenant[block]

    def shared_prefix_len(self, blocks: Sequence[int]) -> int:
        """How many leading `blocks` (live ones) end with the last that has another reference
        too: 0 when only one holder references each. Token-level policies ask it for every
        running request in every step, so the common answer is found at C speed."""
        refs = list(map(self._ref.__getitem__, blocks))
        if refs.count(1) == len(refs):
            return 0
        return next((i + 1 for i in range(len(refs) - 1, -1, -1) if refs[i] > 1), 0)

    def blocks_with_request_refs(self) -> list[int]:
        """The blocks with more references than holds: those some request references. What the
        orphan check accounts for; O(blocks) at C speed, since the engine loop runs it while
        it serves (a Python loop over a 27K-block pool cost tens of ms)."""
        return list(compress(count(), map(gt, self._ref, self._hold)))

    def is_cached(self, block: int) -> bool:
        return self._ref[block] == 0 and self._hash[block] is not None

    def knows_any(self, block_hashes: Sequence[int]) -> bool:
        """Whether a block (live or cached) holds any of these contents. At C speed."""
        return not self._hash_to_block.keys().isdisjoint(block_hashes)

    def cached_block(self, block_hash: int) -> int | None:
        return self._hash_to_block.get(block_hash)

    # ------------------------------------------------------------- allocation
    def allocate(self, num: int, tenant: str | None, now_s: float) -> list[int] | None:
        """`num` fresh blocks at refcount 1 owned by `tenant`, evicting cached blocks if needed."""
        if num <= 0:
            return []
        free = self._free
        if num > len(free) + len(self._cached):
            self.num_alloc_failures += 1
            return None
        take = min(num, len(free))
        blocks = free[len(free) - take :]
        del free[len(free) - take :]
        if take < num:
            blocks.extend(self._evict_cached(num - take, now_s))
        ref, owner = self._ref, self._tenant
        for b in blocks:
            ref[b] = 1
            owner[b] = tenant
        self.num_live += num
        self.live_by_tenant[tenant] = self.live_by_tenant.get(tenant, 0) + num
        return blocks

    def _evict_cached(self, num: int, now_s: float) -> list[int]:
        victims = self._cached.pop_victims(num, now_s)
        h2b, hashes = self._hash_to_block, self._hash
        hashed = cast("list[int]", hashes)  # the cached tier holds hashed blocks only: victims have one
        if self.on_evict is not None and victims:
            owner = self._tenant
            self.on_evict([hashed[b] for b in victims], [owner[b] for b in victims], list(victims), now_s)
        if self.kv_events is not None:
            self.kv_events.removed([hashed[b] for b in victims])
        for b in victims:
            del h2b[hashed[b]]
            hashes[b] = None
        self.num_evicted_cached += len(victims)
        assert len(victims) >= num, "cached index returned fewer victims than it holds"
        if len(victims) > num:  # an index may overshoot; the surplus is simply free now
            self._free.extend(victims[num:])
            del victims[num:]
        return victims

    def evict_cached(self, num: int, now_s: float) -> int:
        """Drop up to `num` cached blocks to the free stack; returns how many were dropped."""
        victims = self._evict_cached(min(num, len(self._cached)), now_s)
        self._free.extend(victims)
        return len(victims)

    # ------------------------------------------------------------ prefix cache
    def match_prefix(self, block_hashes: Sequence[int]) -> list[int]:
        """The blocks of the longest cached prefix of `block_hashes` (not yet referenced), counted
        as a prefix-cache query and its hits."""
        hits = self.cached_prefix(block_hashes)
        self.num_prefix_queries += len(block_hashes)
        self.num_prefix_hits += len(hits)
        return hits

    def count_as_external(self, num_blocks: int) -> None:
        """`num_blocks` of the hits counted were blocks a KV transfer filled for the request (a
        P/D pull), not the cache's: counted apart, as vLLM counts a connector's tokens
        (`vllm:external_prefix_cache_hits`)."""
        self.num_prefix_hits -= num_blocks
        self.num_external_hits += num_blocks

    def cached_prefix(self, block_hashes: Sequence[int]) -> list[int]:
        """The same blocks, not counted: a look the engine takes for itself (a P/D pull's source
        and reservation), not a request's query."""
        h2b = self._hash_to_block
        hits: list[int] = []
        for h in block_hashes:
            b = h2b.get(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def register_many(self, blocks: Sequence[int], block_hashes: Sequence[int]) -> None:
        """`register` for consecutive full blocks of one request, in bulk when none of the hashes
        is known yet and none of the blocks is hashed (the common case)."""
        h2b, hashes = self._hash_to_block, self._hash
        if h2b.keys().isdisjoint(block_hashes) and [hashes[b] for b in blocks].count(None) == len(blocks):
            h2b.update(zip(block_hashes, blocks))
            for b, h in zip(blocks, block_hashes):
                hashes[b] = h
            return
        for b, h in zip(blocks, block_hashes):
            self.register(b, h)

    def register(self, block: int, block_hash: int) -> bool:
        """Mark a live, now full block as holding `block_hash`. False if another block already
        holds that content (two requests computed it at once): the block stays unhashed."""
        if block_hash in self._hash_to_block or self._hash[block] is not None:
            return False
        self._hash[block] = block_hash
        self._hash_to_block[block_hash] = block
        return True

    def unregister(self, block: int) -> None:
        """Forget a live block's hash (its content stopped being an exact prefix)."""
        h = self._hash[block]
        if h is not None:
            del self._hash_to_block[h]
            self._hash[block] = None
            if self.kv_events is not None:
                self.kv_events.removed([h])

    # ------------------------------------------------------------- references
    def incref(self, blocks: Sequence[int], now_s: float, *, hold: bool = False) -> None:
        """Take one more reference on each block (a prefix hit, or a session retaining it)."""
        ref, holds, hashes, cached = self._ref, self._hold, self._hash, self._cached
        self.sharing_epoch += 1
        revived: list[int] = []
        for b in blocks:
            r = ref[b]
            if r == 0:
                assert hashes[b] is not None, f"block {b} is free; only cached blocks can be hit"
                cached.remove(b, now_s)
                revived.append(b)
            elif holds[b] == r:
                self.num_retained -= 1  # a request now shares a block only a session held
            ref[b] = r + 1
            if hold:
                holds[b] += 1
                self._held.add(b)
                if holds[b] == r + 1:
                    self.num_retained += 1
        if revived:
            self.num_live += len(revived)
            self._count_tenants(revived, +1)

    def decref(self, blocks: Sequence[int], now_s: float, meta: EntryMeta | None = None, *, hold: bool = False) -> int:
        """Drop one reference on each block; returns how many blocks left the live state.

        Blocks reaching refcount 0 go to the cached tier if hashed (tail first, so a chain is
        evicted from its end) and to the free stack otherwise.
        """
        ref = self._ref
        released: Sequence[int]
        if hold or not self._held.isdisjoint(blocks):
            released = self._decref_held(blocks, hold)
            self.sharing_epoch += 1
        elif [ref[b] for b in blocks].count(1) == len(blocks):
            # the hot path of every request's release: no retained state, no block shared
            for b in blocks:
                ref[b] = 0
            released = blocks[::-1]
        else:  # no retained state, but some blocks are shared (prefix hits of running requests)
            self.sharing_epoch += 1
            to_release: list[int] = []
            for b in reversed(blocks):
                r = ref[b] - 1
                ref[b] = r
                if not r:
                    to_release.append(b)
                elif r < 0:
                    raise AssertionError(f"block {b} released more often than referenced")
            released = to_release
        if not released:
            return 0
        self.num_live -= len(released)
        self._count_tenants(released, -1)
        hashes = self._hash
        to_cache = [b for b in released if hashes[b] is not None]
        if len(to_cache) < len(released):
            self._free.extend([b for b in released if hashes[b] is None])
        if to_cache:
            self._cached.insert(to_cache, meta or EntryMeta(), now_s)
        return len(released)

    def _decref_held(self, blocks: Sequence[int], hold: bool) -> list[int]:
        """decref's path when sessions or pins hold some of the blocks: keeps `num_retained`."""
        ref, holds = self._ref, self._hold
        released: list[int] = []
        for b in reversed(blocks):
            r = ref[b] - 1
            assert r >= 0, f"block {b} released more often than referenced"
            ref[b] = r
            h = holds[b]
            if h or hold:
                assert h, f"block {b} has no hold to release"
                if h == r + 1:
                    self.num_retained -= 1
                if hold:
                    h -= 1
                    holds[b] = h
                    if not h:
                        self._held.discard(b)
                if r and h == r:
                    self.num_retained += 1
            if r == 0:
                released.append(b)
        return released

    def _count_tenants(self, blocks: Sequence[int], sign: int) -> None:
        counts = self.live_by_tenant
        owners = list(map(self._tenant.__getitem__, blocks))
        first = owners[0]
        if owners.count(first) == len(owners):  # the common case: one request, one tenant
            counts[first] = counts.get(first, 0) + sign * len(owners)
            return
        for t in owners:
            counts[t] = counts.get(t, 0) + sign

    # ------------------------------------------------------------ consistency
    def check_invariants(self) -> None:
        """O(n) self-check for tests: counts add up and every index agrees with the arrays."""
        live = sum(1 for r in self._ref if r > 0)
        assert live == self.num_live, (live, self.num_live)
        assert all(r >= 0 for r in self._ref)
        assert all(0 <= h <= r for h, r in zip(self._hold, self._ref))
        assert self._held == {b for b, h in enumerate(self._hold) if h}
        retained = sum(1 for h, r in zip(self._hold, self._ref) if r > 0 and h == r)
        assert retained == self.num_retained, (retained, self.num_retained)
        cached = [b for b in range(self.num_blocks) if self._ref[b] == 0 and self._hash[b] is not None]
        assert len(cached) == len(self._cached) and all(b in self._cached for b in cached)
        assert sorted(self._free) == [b for b in range(self.num_blocks) if self._ref[b] == 0 and self._hash[b] is None]
        assert self.num_live + self.num_cached + self.num_free == self.num_blocks
        assert all(self._hash_to_block[h] == b for b, h in enumerate(self._hash) if h is not None)
        by_tenant: dict[str | None, int] = {}
        for b, r in enumerate(self._ref):
            if r:
                by_tenant[self._tenant[b]] = by_tenant.get(self._tenant[b], 0) + 1
        assert {k: v for k, v in self.live_by_tenant.items() if v} == by_tenant
