"""LRU over the blocks tier as an append-only queue with lazy deletion.

Every prefix block of every request passes through the blocks tier: released at refcount 0
(`insert`), hit again (`remove`) or evicted for a new allocation (`pop_victims`). A Mooncake
replay moves about 3 million blocks through it, so its per-block cost is the replay's cost. A C
`OrderedDict` (`LruIndex`) pays ≈ 0.35 µs per insert and ≈ 0.3 µs per pop; this index pays a
`list.extend` per release and a slice per eviction, both at C speed, and Python work only for
the keys that were hit while cached.

It serves the tiers whose entries are single blocks in release order — the blocks tier of
`lru` (with `touch_on_decode`), of the baselines and of the token-level policies — and orders
them exactly as `LruIndex` does (tests/unit/policies/test_index_properties.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic

from reference_engine.policies.base import EntryMeta, EvictionIndex, IndexKind, K, LruIndex

_COMPACT_AT = 1 << 16  # popped slots kept before the list is compacted (amortised O(1) per pop)


class LruQueueIndex(Generic[K]):
    """Least recently used first, for entries of one block each.

    Invariants: `_queue[_head:]` holds every key inserted and not yet popped, oldest first,
    including keys removed since (a prefix hit): `remove` only counts the key in `_stale`. A
    key is removed before it can be inserted again, so its stale copies are always its
    *earliest* ones; a pop skips a key while its stale count is positive, and the copies of a
    key in the queue number `_stale[key]` + (1 if it is in the index). Insert and remove are
    O(1); a pop is O(keys popped + stale copies skipped). Both kinds of dead slot are bounded:
    popped ones are cut off once they are half the list, stale copies are dropped in one pass
    once they outnumber the entries (a pool that never evicts still sees hits), each amortised
    O(1) per operation.
    """

    victims_depend_on_time = False

    def __init__(self) -> None:
        self._queue: list[K] = []
        self._head = 0
        self._stale: dict[K, int] = {}
        self._num_stale = 0
        self._len = 0

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        if meta.size_blocks != 1:
            raise ValueError("LruQueueIndex holds single blocks; use LruIndex for sized entries")
        self._queue.extend(keys)
        self._len += len(keys)

    def remove(self, key: K, now_s: float) -> None:
        stale = self._stale
        stale[key] = stale.get(key, 0) + 1
        self._len -= 1
        self._num_stale += 1
        if self._num_stale > self._len and self._num_stale > _COMPACT_AT:  # max() is a call: avoided
            self._drop_stale()

    def pop_victims(self, num_blocks: int, now_s: float, *, strict: bool = False) -> list[K]:
        num = min(num_blocks, self._len)  # every entry is one block: strict changes nothing
        if num <= 0:
            return []
        queue, head, stale = self._queue, self._head, self._stale
        victims = queue[head : head + num]
        if stale and not stale.keys().isdisjoint(victims):
            victims, head = self._take_live(num)
        else:
            head += num
        self._len -= num
        if head >= _COMPACT_AT and 2 * head >= len(queue):
            del queue[:head]
            head = 0
        self._head = head
        return victims

    def first(self) -> K | None:
        """The next victim, without popping it (None when empty): O(stale copies skipped)."""
        if not self._len:
            return None
        [key], head = self._take_live(1)
        self._head = head - 1  # the stale copies before it are gone, the key stays
        return key

    def _take_live(self, num: int) -> tuple[list[K], int]:
        """The next `num` live keys from `_head` on and the position past the last of them,
        consuming the stale copies passed on the way (`_head` itself is the caller's to move).
        After a run of prefix hits every victim may have a stale copy ahead of it, so this loop
        can see two keys per victim: it is written for speed (no call per key)."""
        queue, head, stale = self._queue, self._head, self._stale
        live: list[K] = []
        append, get = live.append, stale.get
        num_skipped = 0
        while len(live) < num:
            key = queue[head]
            head += 1
            copies = get(key)
            if copies is None:
                append(key)
                continue
            num_skipped += 1
            if copies == 1:
                del stale[key]
            else:
                stale[key] = copies - 1
        self._num_stale -= num_skipped
        return live, head

    def _drop_stale(self) -> None:
        """Rewrite the queue without its stale copies. Past the last live key only stale copies
        are left (of keys not in the index), and they are all the stale counts still open."""
        self._queue, _ = self._take_live(self._len)
        self._head = 0
        self._stale.clear()
        self._num_stale = 0

    def pop_overflow(self, now_s: float) -> list[K]:
        return []  # the blocks tier has no entry cap: the pool's size bounds it

    def __len__(self) -> int:
        return self._len

    def __contains__(self, key: K) -> bool:
        """O(n): for consistency checks only (the pool knows a cached block by its refcount and
        hash, and never asks the index)."""
        return self._queue[self._head :].count(key) > self._stale.get(key, 0)


def make_lru_index(tier: IndexKind) -> EvictionIndex:
    """The uncapped LRU index for a tier: the queue for single blocks, `LruIndex` for sessions."""
    return LruQueueIndex() if tier is IndexKind.BLOCKS else LruIndex()
