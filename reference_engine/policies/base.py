"""The eviction-policy extension point: an ordered index over reusable KV state.

Reusable state lives in two tiers, and each tier is ordered by its own `EvictionIndex`:

- **blocks**: prefix-cache blocks at refcount 0 (finished prefixes). They are not counted in
  usage (vLLM counts them as free); the pool evicts them on demand when an allocation finds no
  free block.
- **sessions**: idle multi-turn sessions and their retained blocks. They *are* counted in usage;
  the engine evicts them when usage crosses the evict watermark (on the policy's tick), when
  they idle past `max_session_idle_seconds`, when a session exceeds `max_tokens_per_session`,
  or when a tenant's index holds more sessions than the policy's capacity (`pop_overflow`).

What an index sees of an entry's life: `insert` when it becomes reusable (a block released at
refcount 0, a session between turns), `remove` when it becomes live again (a prefix hit, the
session's next turn), `pop_victims` / `pop_overflow` when it is evicted. An access therefore
shows up as `remove` + a later `insert` of the same key; indexes that rank by reuse keep what
they learnt about removed keys in a bounded `History`, so that the next insert continues it.

A policy (`lru`, `multi_queue`, `value_density`, ...) is one index class used for both tiers,
plus a few behaviour flags for the baselines (`none`, `vllm_like`). Every index operation is
O(1) or O(log n) (amortised where a docstring says so); none may scan the index.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# How many removed sessions a sessions-tier index remembers (as many as the store remembers).
SESSION_HISTORY_CAPACITY = 100_000


class IndexKind(str, Enum):
    """What an eviction index orders: the pool's cached blocks or the idle sessions."""

    BLOCKS = "blocks"
    SESSIONS = "sessions"


@dataclass(frozen=True, slots=True)
class EntryMeta:
    """What a policy may know about an entry when it enters the index.

    `size_blocks` is per key (1 for a block). `saved_prefill_s` is the prefill time a hit on
    the entry saves (its rebuild cost); `tokens` is the length of the owning sequence and
    `is_active` says whether that sequence goes on (a preempted request, a session between
    turns), which is how multi_queue recognises long active sessions. `last_access_s` is when
    the entry was last used, if not now (lru without `touch_on_decode`).
    """

    size_blocks: int = 1
    tokens: int = 0
    tenant: str | None = None
    priority: int = 0
    saved_prefill_s: float = 0.0
    is_active: bool = False
    last_access_s: float | None = None


class EvictionIndex(Protocol[K]):
    """An ordering of evictable entries. Keys enter, leave (live again: `remove`) or are popped as
    victims; an access is a `remove` followed by an `insert` when the entry is released again.

    `victims_depend_on_time`: whether which keys `pop_victims` returns depends on when it is
    asked (an index that demotes by age), not only on the inserts and removes before it. When
    not, popping n and then m keys gives the keys one pop of n + m does, in the same order: the
    scheduler then grows a plan's later steps request by request (`Scheduler._apply_later_steps`).
    """

    victims_depend_on_time: bool

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        """Add keys, the first key to be evicted first among them."""
        ...

    def remove(self, key: K, now_s: float) -> None:
        """Take a key out because it became live again (a prefix hit, a session's next turn)."""
        ...

    def pop_victims(self, num_blocks: int, now_s: float, *, strict: bool = False) -> list[K]:
        """Remove and return keys in eviction order until they cover `num_blocks` (or none remain).

        With `strict`, never more than `num_blocks`: the pop ends before an entry that would
        not fit (a rate-limited tick), so it may return fewer, or nothing."""
        ...

    def pop_overflow(self, now_s: float) -> list[K]:
        """Remove and return the keys beyond the index's entry capacity (most have none)."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, key: K) -> bool: ...


class History(Generic[K, V]):
    """What an index remembers about keys that left it by `remove` (they became live again), so
    that their next insert continues their history instead of starting over.

    Bounded: past `capacity` keys the oldest memory is dropped. A key is either in its index
    or (maybe) here, never both: `take` on insert consumes the memory. Evicted keys are never
    remembered, so a block id reused for new content starts clean. All operations O(1)
    (an `OrderedDict` in the order memories were made)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._memory: OrderedDict[K, V] = OrderedDict()

    def keep(self, key: K, value: V) -> None:
        memory = self._memory
        memory[key] = value
        memory.move_to_end(key)
        if len(memory) > self.capacity:
            memory.popitem(last=False)

    def take(self, key: K) -> V | None:
        memory = self._memory
        return memory.pop(key, None) if memory else None

    def knows_none_of(self, keys: Sequence[K]) -> bool:
        """True if no key of `keys` has a memory (then `take` would return None for each)."""
        return self._memory.keys().isdisjoint(keys)

    def __len__(self) -> int:
        return len(self._memory)


class LruIndex(Generic[K]):
    """Least recently used first: the sessions tier of `lru` (with `touch_on_decode`), of the
    baselines and of the token-level policies (their blocks tier is `LruQueueIndex`).

    An `OrderedDict` key -> size is a C doubly-linked list + hash map in recency order (oldest
    first): insert, remove and pop are all O(1); peeking at the oldest entry for a strict pop is
    O(1) too. Invariant: the order is the order of the last insert. `max_entries` (sessions
    tier: `[lru] max_entries`) bounds the number of entries: once it is passed, `pop_overflow`
    returns the oldest entries, at least `overflow_batch` of them (`[lru] evict_batch_size`), so
    overflow is handled in batches rather than per insert.
    """

    victims_depend_on_time = False

    def __init__(self, max_entries: int | None = None, overflow_batch: int = 1) -> None:
        self._order: OrderedDict[K, int] = OrderedDict()
        self.max_entries = max_entries
        self.overflow_batch = overflow_batch
        self._unit_sizes = True  # every entry has size 1 (the blocks tier): pops need no sizes

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        size = meta.size_blocks
        if size != 1:
            self._unit_sizes = False
        self._order.update(dict.fromkeys(keys, size))

    def remove(self, key: K, now_s: float) -> None:
        del self._order[key]

    def pop_victims(self, num_blocks: int, now_s: float, *, strict: bool = False) -> list[K]:
        order = self._order
        if self._unit_sizes:  # n entries of one block each: one C call per victim, no bookkeeping
            popitem = order.popitem
            return [popitem(False)[0] for _ in range(min(num_blocks, len(order)))]
        victims: list[K] = []
        freed = 0
        while freed < num_blocks and order:
            if strict and freed + next(iter(order.values())) > num_blocks:
                break
            key, size = order.popitem(last=False)
            victims.append(key)
            freed += size
        return victims

    def pop_overflow(self, now_s: float) -> list[K]:
        order, cap = self._order, self.max_entries
        if cap is None or len(order) <= cap:
            return []
        # a batch larger than the index (max_entries below evict_batch_size) empties it, no more
        return [
            order.popitem(last=False)[0] for _ in range(min(len(order), max(len(order) - cap, self.overflow_batch)))
        ]

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: object) -> bool:
        return key in self._order
