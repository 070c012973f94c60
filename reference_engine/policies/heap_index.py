"""A min-priority eviction index over a binary heap with lazy deletion.

Policies that rank entries by a number that is not simply "time of insertion" (value density,
recency given by `EntryMeta.last_access_s`) cannot keep their order in a linked list; they
subclass `HeapIndex` and say what an entry's priority is.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic

from reference_engine.policies.base import K


class HeapIndex(Generic[K]):
    """Lowest priority first; ties go to the entry (re)prioritised first.

    Invariants: `_live` maps every key in the index to (stamp, size, priority) of its *current*
    heap entry; any heap entry whose stamp differs is stale and is skipped when it reaches the top.
    When a push finds stale entries outnumbering live ones, the heap is rebuilt from the live
    ones, so it holds O(len + removals since the last push). Costs: insert and re-prioritising
    (`_push`) O(log n); remove O(1); pop O(log n) amortised (a stale entry goes once).
    Only this class touches `_heap` and `_live`; subclasses call `_push`, `_discard`, `_pop`.
    `max_entries` / `overflow_batch` bound the number of entries as in `LruIndex`.
    """

    def __init__(self, max_entries: int | None = None, overflow_batch: int = 1) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._live: dict[K, tuple[int, int, float]] = {}
        self._stamps = itertools.count()
        self.max_entries = max_entries
        self.overflow_batch = overflow_batch

    # ------------------------------------------------------------ subclass API
    def _push(self, key: K, priority: float, size: int) -> None:
        stamp = next(self._stamps)
        self._live[key] = (stamp, size, priority)
        heapq.heappush(self._heap, (priority, stamp, key))
        if len(self._heap) > 2 * len(self._live) + 1:
            self._heap = [(p, s, k) for k, (s, _, p) in self._live.items()]
            heapq.heapify(self._heap)

    def _discard(self, key: K) -> int:
        """Forget `key` (its heap entry goes stale); returns its size."""
        return self._live.pop(key)[1]

    def _peek(self) -> tuple[K, float, int] | None:
        heap, live = self._heap, self._live
        while heap:
            priority, stamp, key = heap[0]
            entry = live.get(key)
            if entry is not None and entry[0] == stamp:
                return key, priority, entry[1]
            heapq.heappop(heap)
        return None

    def _pop(self) -> K:
        """Pop the lowest live entry (callers check len(self) first)."""
        key, priority, _ = self._peek()
        heapq.heappop(self._heap)
        del self._live[key]
        self._evicted(key, priority)
        return key

    def _evicted(self, key: K, priority: float) -> None:
        """Hook: `key` left as a victim with `priority` (GDSF inflates its clock here)."""

    def priority_of(self, key: K) -> float:
        """The current priority of a key in the index (for tests and the ledger)."""
        return self._live[key][2]

    # ------------------------------------------ EvictionIndex (insert/remove: subclasses)
    def pop_victims(self, num_blocks: int, now_s: float, *, strict: bool = False) -> list[K]:
        heap, live, heappop, evicted = self._heap, self._live, heapq.heappop, self._evicted
        victims: list[K] = []
        freed = 0
        while freed < num_blocks and live:
            priority, stamp, key = heap[0]
            entry = live.get(key)
            if entry is None or entry[0] != stamp:  # stale: skip it for good
                heappop(heap)
                continue
            if strict and freed + entry[1] > num_blocks:
                break
            heappop(heap)
            del live[key]
            evicted(key, priority)
            victims.append(key)
            freed += entry[1]
        return victims

    def pop_overflow(self, now_s: float) -> list[K]:
        cap = self.max_entries
        if cap is None or len(self._live) <= cap:
            return []
        num = min(len(self._live), max(len(self._live) - cap, self.overflow_batch))  # never past empty
        return [self._pop() for _ in range(num)]

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live
