"""The eviction-policy extension point: an ordered index over reusable KV state.

Reusable state lives in two tiers, and each tier is ordered by its own `EvictionIndex`:

- **blocks**: prefix-cache blocks at refcount 0 (finished prefixes). They are not counted in
  usage (vLLM counts them as free); the pool evicts them on demand when an allocation finds no
  free block.
- **sessions**: idle multi-turn sessions and their retained blocks. They *are* counted in usage;
  the engine evicts them when usage crosses the evict watermark, when they idle past
  `max_session_idle_seconds`, or when a session exceeds `max_tokens_per_session`.

A policy (`lru`, `multi_queue`, `value_density`, ...) is one index class used for both tiers,
plus a few behaviour flags for the baselines (`none`, `vllm_like`). Every index operation is
O(1) or O(log n); none may scan the index.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


class Tier(str, Enum):
    BLOCKS = "blocks"
    SESSIONS = "sessions"


@dataclass(frozen=True, slots=True)
class EntryMeta:
    """What a policy may know about an entry when it enters the index.

    `size_blocks` is per key (1 for a block). `saved_prefill_s` is the prefill time a hit on
    the entry saves (its rebuild cost); `tokens` is the length of the owning sequence, which
    is how multi_queue recognises long sessions.
    """

    size_blocks: int = 1
    tokens: int = 0
    tenant: str | None = None
    priority: int = 0
    saved_prefill_s: float = 0.0
    is_active: bool = False


class EvictionIndex(Protocol[K]):
    """An ordering of evictable entries. Keys enter, are touched, leave or are popped as victims."""

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        """Add keys, the first key to be evicted first among them."""
        ...

    def touch(self, key: K, now_s: float) -> None:
        """Record an access (a prefix hit, a session turn) to a key that stays in the index."""
        ...

    def remove(self, key: K) -> None:
        """Take a key out for a reason other than eviction (it became live again)."""
        ...

    def pop_victims(self, num_blocks: int, now_s: float) -> list[K]:
        """Remove and return keys in eviction order until they cover `num_blocks` (or none remain)."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, key: object) -> bool: ...


class LruIndex(Generic[K]):
    """Least recently used first. An `OrderedDict` is a C doubly-linked list + hash map:
    insert, touch (`move_to_end`), remove and pop are all O(1)."""

    def __init__(self) -> None:
        self._order: OrderedDict[K, int] = OrderedDict()

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        size = meta.size_blocks
        self._order.update(dict.fromkeys(keys, size))

    def touch(self, key: K, now_s: float) -> None:
        self._order.move_to_end(key)

    def remove(self, key: K) -> None:
        del self._order[key]

    def pop_victims(self, num_blocks: int, now_s: float) -> list[K]:
        victims: list[K] = []
        popitem = self._order.popitem
        freed = 0
        while freed < num_blocks and self._order:
            key, size = popitem(last=False)
            victims.append(key)
            freed += size
        return victims

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: object) -> bool:
        return key in self._order
