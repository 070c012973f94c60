"""`lru`: page/entry LRU over reusable state (`[lru] max_entries, evict_batch_size,
touch_on_decode`).

- blocks tier: refcount-0 prefix blocks, least recently used first (a chain tail first).
- sessions tier: idle sessions, least recently used first; at most `max_entries` per tenant:
  once a tenant passes it, its oldest `evict_batch_size` sessions (at least those beyond the
  cap) are evicted at once, with reason `overflow`.
- `touch_on_decode`: entries never decode while they are in the index (an idle session or a
  refcount-0 block is by definition not running), so the flag decides which time an entry's
  recency is: the end of its last decode step (true: the moment it was released, the O(1)
  `LruIndex`, `LruQueueIndex` for the blocks tier), or the moment its request was last
  scheduled (false: a decode is not an access; these times arrive out of order, so
  `RecencyIndex` keeps them in a heap, O(log n)).
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_engine.config import EngineConfig
from reference_engine.memory import MemoryPlan
from reference_engine.policies.base import EntryMeta, IndexKind, K, LruIndex
from reference_engine.policies.heap_index import HeapIndex
from reference_engine.policies.lru_queue import LruQueueIndex
from reference_engine.policies.policy import Policy


class RecencyIndex(HeapIndex[K]):
    """Least recently used first, where an entry's recency is `meta.last_access_s` (its last
    scheduling) rather than its insertion. A heap keyed by that time (see `HeapIndex` for the
    invariants and costs)."""

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        self._push_many(keys, now_s if meta.last_access_s is None else meta.last_access_s, meta.size_blocks)

    def remove(self, key: K, now_s: float) -> None:
        self._discard(key)


def make_lru(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.lru
    index = LruIndex if cfg.touch_on_decode else RecencyIndex

    def make_index(tier: IndexKind):
        if tier is IndexKind.SESSIONS:
            return index(cfg.max_entries, cfg.evict_batch_size)
        return LruQueueIndex() if cfg.touch_on_decode else RecencyIndex()

    return Policy("lru", make_index, touch_on_decode=cfg.touch_on_decode)
