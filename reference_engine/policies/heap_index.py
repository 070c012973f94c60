"""A min-priority eviction index over a binary heap with lazy deletion.

Policies that rank entries by a number that is not simply "time of insertion" (value density,
recency given by `EntryMeta.last_access_s`) cannot keep their order in a linked list; they
subclass `HeapIndex` and say what an entry's priority is.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from typing import Generic

from reference_engine.policies.base import K

_REBUILD_SLACK = 64  # stale slots tolerated beyond twice the live keys


class HeapIndex(Generic[K]):
    """Lowest priority first; ties go to the entry (re)prioritised first.

    Keys pushed together with one priority (a released chain of blocks, all at one recency)
    share one heap item, `(priority, stamp, keys)`, the keys in push order and taken from the
    front: a release of hundreds of blocks is one heap push, not hundreds.

    Invariants: `_live` maps every key in the index to (stamp, size, priority) of its current
    item; a key sitting in an item whose stamp is not its `_live` stamp (removed, or pushed again
    since) is stale and is skipped when it reaches the front. `_slots` counts the keys items
    hold, stale ones included; when they pass twice the live keys the heap is rebuilt from
    `_live`, so it holds O(len + changes since the last rebuild). Costs: a push O(log n + keys);
    remove O(1); a pop O(1) per key plus O(log n) per item it empties, amortised (a stale key
    is skipped once). Only this class touches `_heap` and `_live`; subclasses call `_push`,
    `_push_many`, `_discard`, `_pop`. `max_entries` / `overflow_batch` bound the number of
    entries as in `LruIndex`.
    """

    victims_depend_on_time = False  # an entry's priority is set when it is pushed

    def __init__(self, max_entries: int | None = None, overflow_batch: int = 1) -> None:
        self._heap: list[tuple[float, int, deque[K]]] = []
        self._live: dict[K, tuple[int, int, float]] = {}
        self._stamps = itertools.count()
        self._slots = 0
        self.max_entries = max_entries
        self.overflow_batch = overflow_batch

    # ------------------------------------------------------------ subclass API
    def _push(self, key: K, priority: float, size: int) -> None:
        self._push_many((key,), priority, size)

    def _push_many(self, keys: Sequence[K], priority: float, size: int) -> None:
        """(Re)prioritise `keys`, in this order, as one item."""
        if not keys:
            return
        live = self._live
        if not live.keys().isdisjoint(keys):  # pushed again: their place is the new one
            for key in keys:
                live.pop(key, None)
        stamp = next(self._stamps)
        live.update(dict.fromkeys(keys, (stamp, size, priority)))
        heapq.heappush(self._heap, (priority, stamp, deque(keys)))
        self._slots += len(keys)
        if self._slots > 2 * len(live) + _REBUILD_SLACK:
            self._rebuild()

    def _rebuild(self) -> None:
        """One item per stamp of the live keys (`_live` keeps each item's keys in push order)."""
        items: dict[int, tuple[float, deque[K]]] = {}
        for key, (stamp, _, priority) in self._live.items():
            item = items.get(stamp)
            if item is None:
                items[stamp] = (priority, deque((key,)))
            else:
                item[1].append(key)
        self._heap = [(priority, stamp, keys) for stamp, (priority, keys) in items.items()]
        heapq.heapify(self._heap)
        self._slots = len(self._live)

    def _discard(self, key: K) -> int:
        """Forget `key` (its place in its item goes stale); returns its size."""
        return self._live.pop(key)[1]

    def _peek(self) -> tuple[K, float, int] | None:
        """The lowest live key, its priority and size, dropping stale keys and empty items."""
        heap, live = self._heap, self._live
        while heap:
            priority, stamp, keys = heap[0]
            while keys:
                entry = live.get(keys[0])
                if entry is not None and entry[0] == stamp:
                    return keys[0], priority, entry[1]
                keys.popleft()
                self._slots -= 1
            heapq.heappop(heap)
        return None

    def _pop(self) -> K:
        """Pop the lowest live entry (callers check len(self) first)."""
        top = self._peek()
        assert top is not None, "_pop on an empty index"
        key, priority, _ = top
        self._heap[0][2].popleft()
        self._slots -= 1
        del self._live[key]
        self._evicted([key], priority)
        return key

    def _evicted(self, keys: list[K], priority: float) -> None:
        """Hook: `keys` (of one item) left as victims with `priority` (GDSF inflates its clock)."""

    def priority_of(self, key: K) -> float:
        """The current priority of a key in the index (for tests and the ledger)."""
        return self._live[key][2]

    # ------------------------------------------ EvictionIndex (insert/remove: subclasses)
    def pop_victims(self, num_blocks: int, now_s: float, *, strict: bool = False) -> list[K]:
        """Item by item from the lowest: each item's live keys from its front, in one inlined
        loop (a released chain is popped as a run, with one hook call)."""
        victims: list[K] = []
        freed = 0
        live = self._live
        while freed < num_blocks and live:
            top = self._peek()  # the front item now starts with a live key
            assert top is not None, "every live key sits in an item of the heap"
            _, priority, size = top
            if strict and freed + size > num_blocks:
                break
            _, stamp, keys = self._heap[0]
            taken: list[K] = []
            while keys and freed < num_blocks:
                entry = live.get(keys[0])
                if entry is None or entry[0] != stamp:  # stale: skipped
                    keys.popleft()
                    self._slots -= 1
                    continue
                if strict and freed + entry[1] > num_blocks:
                    break
                key = keys.popleft()
                self._slots -= 1
                del live[key]
                taken.append(key)
                freed += entry[1]
            victims.extend(taken)
            self._evicted(taken, priority)
            if strict and keys and freed < num_blocks:
                break  # the next key of this item does not fit
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
