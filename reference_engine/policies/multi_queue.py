"""`multi_queue`: two FIFOs and an LRU, drained at different speeds on a tick.

    new entry ──> FIFO 1 ──(second access within promotion_window_ms)──> LRU
    long (> long_session_tokens) and active entry ──> FIFO 2
    FIFO 2 ──(not accessed for fifo2_active_ms: its session ended; or FIFO 2 full)──> LRU, cold end
    LRU ──(full: its coldest entry goes cold)──> FIFO 1, with a fresh promotion window
    FIFO 1 full ──> evicted (sessions tier: reason `overflow`)

Eviction takes a share of every request for blocks from each queue, set by the water level
`wl = evict_water_level`: FIFO 1 supplies ⌈wl · n⌉, the LRU ⌈wl · rest⌉, FIFO 2 the remainder
(wl 0.85: 85 % / 13 % / 2 %), so FIFO 1 drains fastest, the LRU at a normal rate and FIFO 2
slowest; what a queue cannot supply passes to the next. On the sessions tier the engine
calls it on a tick every `tick_interval_ms` (while usage is at or above the evict watermark)
asking for at most `max_evict_per_tick_percent` of the pool, strictly, so no tick evicts in
a burst (`Policy.session_tick_s`, `max_session_evict_blocks_per_tick`).

Capacities: on the sessions tier (one index per tenant) `fifo1_capacity`, `lru_capacity` and
`fifo2_capacity` count sessions. On the blocks tier the cached tier's size is set by the
pool, not by the policy, so the three numbers are used as proportions of it (256 : 256 : 128
= 40 % : 40 % : 20 %, each rounded up): overflow there only demotes, it never evicts a block
the pool has not asked for.

What counts as an access: an index sees an entry become live again (`remove`: a prefix hit,
a session's next turn) and come back (`insert`); an entry never changes while it is indexed
(it holds no running request). A promotion earned at `remove` is remembered (`History`)
until the entry comes back.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from enum import Enum
from typing import Generic, NamedTuple

from reference_engine.config import EngineConfig
from reference_engine.memory import MemoryPlan
from reference_engine.policies.base import SESSION_HISTORY_CAPACITY, EntryMeta, History, IndexKind, K
from reference_engine.policies.lru_queue import LruQueueIndex
from reference_engine.policies.policy import Policy


class Queue(str, Enum):
    FIFO1 = "fifo1"  # new entries: evicted fastest
    LRU = "lru"  # re-accessed within the promotion window: evicted at the normal rate
    FIFO2 = "fifo2"  # long entries of active sequences: evicted slowest


EVICTION_ORDER = (Queue.FIFO1, Queue.LRU, Queue.FIFO2)


class _Slot(NamedTuple):
    """Immutable, so one slot serves every key of an insert; an access replaces it."""

    size: int
    since_s: float  # FIFO 1: start of its promotion window; LRU and FIFO 2: last access


class _MultiQueueRules(ABC, Generic[K]):
    """What both multi_queue indexes share: the configuration, the capacities and how a request
    for blocks is split over the queues (`pop_victims`, on each index's `_rebalance` and
    `_pop_from`)."""

    victims_depend_on_time = True  # a pop first demotes what has been idle past `active_s`

    def __init__(
        self,
        *,
        capacities: dict[Queue, int],
        proportional: bool,
        promotion_window_s: float,
        water_level: float,
        long_tokens: int,
        active_s: float,
        history_capacity: int,
    ) -> None:
        self._history: History[K, bool] = History(history_capacity)
        self._capacities = capacities
        self._total_capacity = sum(capacities.values())
        self.proportional = proportional
        self.promotion_window_s = promotion_window_s
        self.water_level = water_level
        self.long_tokens = long_tokens
        self.active_s = active_s

    @abstractmethod
    def __len__(self) -> int: ...

    def capacity(self, queue: Queue) -> int:
        """Entries `queue` may hold: absolute, or its share of the index (rounded up)."""
        cap = self._capacities[queue]
        if self.proportional:
            return math.ceil(len(self) * cap / self._total_capacity)
        return cap

    def shares(self, num_blocks: int) -> tuple[int, int, int]:
        """How a request for `num_blocks` is split over FIFO 1, LRU and FIFO 2."""
        wl = self.water_level
        first = math.ceil(num_blocks * wl)
        second = math.ceil((num_blocks - first) * wl)
        return first, second, num_blocks - first - second

    def pop_victims(self, num_blocks: int, now_s: float, *, strict: bool = False) -> list[K]:
        self._rebalance(now_s)
        victims: list[K] = []
        freed = carry = 0
        for queue, share in zip(EVICTION_ORDER, self.shares(num_blocks)):
            want = share + carry
            got = self._pop_from(queue, min(want, num_blocks - freed), strict, victims)
            freed += got
            carry = max(0, want - got)
        for queue in EVICTION_ORDER:  # what the shares could not supply, in eviction order
            if freed >= num_blocks:
                break
            freed += self._pop_from(queue, num_blocks - freed, strict, victims)
        return victims

    @abstractmethod
    def _rebalance(self, now_s: float) -> None:
        """Demote: FIFO 2 entries that stopped being active (or overflow) to the LRU's cold end,
        then the LRU's coldest entries beyond its capacity to FIFO 1."""

    @abstractmethod
    def _pop_from(self, queue: Queue, want: int, strict: bool, out: list[K]) -> int:
        """Append up to `want` blocks' worth of `queue`'s oldest keys to `out`; returns the blocks."""


class MultiQueueIndex(_MultiQueueRules[K]):
    """FIFO 1, LRU and FIFO 2 as three `OrderedDict`s (C linked list + hash map) plus a key ->
    queue map: the sessions tier, and the definition `MultiQueueBlockIndex` is tested against.

    Invariants: every key is in exactly one queue and `_where` names it; FIFO 1 is in insertion
    order, the LRU in recency order (demoted entries enter at its cold end), FIFO 2 in order of
    last access (so its head is its least active entry); after every insert, and before
    every pop, the LRU and FIFO 2 are within their capacities and FIFO 2's head was accessed
    within `active_s`. Costs: insert, remove O(1); a pop O(1) per victim; a demotion O(1),
    and an entry leaves the LRU or FIFO 2 by demotion at most once per time it entered, so
    demotions are O(1) amortised. Only this class mutates the queues.
    """

    def __init__(self, **rules) -> None:
        super().__init__(**rules)
        self._queues: dict[Queue, OrderedDict[K, _Slot]] = {q: OrderedDict() for q in EVICTION_ORDER}
        self._where: dict[K, Queue] = {}

    # ------------------------------------------------------------- queries
    def queue_of(self, key: K) -> Queue | None:
        return self._where.get(key)

    def num_in(self, queue: Queue) -> int:
        return len(self._queues[queue])

    # ------------------------------------------------------- EvictionIndex
    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        take, queues, where, slot = self._history.take, self._queues, self._where, _Slot(meta.size_blocks, now_s)
        long_active = meta.is_active and meta.tokens > self.long_tokens
        if long_active or self._history.knows_none_of(keys):  # all to one queue: in bulk
            queue = Queue.FIFO2 if long_active else Queue.FIFO1
            queues[queue].update(dict.fromkeys(keys, slot))
            where.update(dict.fromkeys(keys, queue))
        else:
            for key in keys:
                queue = Queue.LRU if take(key) else Queue.FIFO1
                queues[queue][key] = slot
                where[key] = queue
        self._rebalance(now_s)

    def remove(self, key: K, now_s: float) -> None:
        queue = self._where.pop(key)
        slot = self._queues[queue].pop(key)
        if queue is not Queue.FIFO1 or now_s - slot.since_s <= self.promotion_window_s:
            self._history.keep(key, True)

    def pop_overflow(self, now_s: float) -> list[K]:
        if self.proportional:
            return []
        self._rebalance(now_s)
        fifo1 = self._queues[Queue.FIFO1]
        excess = len(fifo1) - self._capacities[Queue.FIFO1]
        out: list[K] = []
        for _ in range(max(0, excess)):
            key, _ = fifo1.popitem(last=False)
            del self._where[key]
            out.append(key)
        return out

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    # ------------------------------------------------------------ internals
    def _move(self, key: K, src: Queue, dst: Queue, *, cold_end: bool = False) -> Queue:
        slot = self._queues[src].pop(key)
        target = self._queues[dst]
        target[key] = slot
        if cold_end:
            target.move_to_end(key, last=False)
        self._where[key] = dst
        return dst

    def _rebalance(self, now_s: float) -> None:
        """Demote: FIFO 2 entries that stopped being active (or overflow) to the LRU's cold end,
        then the LRU's coldest entries beyond its capacity to FIFO 1."""
        fifo2, lru = self._queues[Queue.FIFO2], self._queues[Queue.LRU]
        cap2 = self.capacity(Queue.FIFO2)
        while fifo2:
            key, slot = next(iter(fifo2.items()))
            if now_s - slot.since_s < self.active_s and len(fifo2) <= cap2:
                break
            self._move(key, Queue.FIFO2, Queue.LRU, cold_end=True)
        cap_lru = self.capacity(Queue.LRU)
        fifo1 = self._queues[Queue.FIFO1]
        while len(lru) > cap_lru:
            key = next(iter(lru))
            self._move(key, Queue.LRU, Queue.FIFO1)
            fifo1[key] = fifo1[key]._replace(since_s=now_s)

    def _pop_from(self, queue: Queue, want: int, strict: bool, out: list[K]) -> int:
        entries, where = self._queues[queue], self._where
        got = 0
        while got < want and entries:
            if strict and got + next(iter(entries.values())).size > want:
                break
            key, slot = entries.popitem(last=False)
            del where[key]
            out.append(key)
            got += slot.size
        return got


_ONE_BLOCK = EntryMeta()


class MultiQueueBlockIndex(_MultiQueueRules[K]):
    """The blocks tier, where every entry is one block and the capacities are proportions: the
    same queues, orders, demotions and victims as `MultiQueueIndex` (tested side by side), at
    the cost of the LRU policy's blocks tier. Every released prefix block enters FIFO 1 and
    most evictions take FIFO 1's oldest, so FIFO 1 and FIFO 2 are `LruQueueIndex`es (a FIFO is
    an LRU queue whose entries are never touched again: append-only, lazy deletion, a slice
    per eviction); the LRU, whose cold end takes FIFO 2's demotions, stays an `OrderedDict`.
    `_where` maps each key to (its queue, since): FIFO 1 the start of its promotion window, the
    LRU and FIFO 2 its last access; one tuple serves every key of an insert."""

    def __init__(self, **rules) -> None:
        super().__init__(proportional=True, **rules)
        self._fifos: dict[Queue, LruQueueIndex[K]] = {Queue.FIFO1: LruQueueIndex(), Queue.FIFO2: LruQueueIndex()}
        self._lru: OrderedDict[K, None] = OrderedDict()
        self._where: dict[K, tuple[Queue, float]] = {}

    def queue_of(self, key: K) -> Queue | None:
        where = self._where.get(key)
        return None if where is None else where[0]

    def num_in(self, queue: Queue) -> int:
        return len(self._lru) if queue is Queue.LRU else len(self._fifos[queue])

    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        if meta.size_blocks != 1:
            raise ValueError("MultiQueueBlockIndex holds single blocks; use MultiQueueIndex for sized entries")
        long_active = meta.is_active and meta.tokens > self.long_tokens
        if long_active or self._history.knows_none_of(keys):  # all to one queue: in bulk
            queue = Queue.FIFO2 if long_active else Queue.FIFO1
            self._fifos[queue].insert(keys, _ONE_BLOCK, now_s)
            self._where.update(dict.fromkeys(keys, (queue, now_s)))
        else:
            take, lru, fifo1, where = self._history.take, self._lru, self._fifos[Queue.FIFO1], self._where
            for key in keys:
                if take(key):
                    lru[key] = None
                    where[key] = (Queue.LRU, now_s)
                else:
                    fifo1.insert((key,), _ONE_BLOCK, now_s)
                    where[key] = (Queue.FIFO1, now_s)
        self._rebalance(now_s)

    def remove(self, key: K, now_s: float) -> None:
        queue, since = self._where.pop(key)
        if queue is Queue.LRU:
            del self._lru[key]
        else:
            self._fifos[queue].remove(key, now_s)
        if queue is not Queue.FIFO1 or now_s - since <= self.promotion_window_s:
            self._history.keep(key, True)

    def pop_overflow(self, now_s: float) -> list[K]:
        return []  # proportional capacities only demote

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def _rebalance(self, now_s: float) -> None:
        """As `MultiQueueIndex._rebalance`; the LRU's excess moves to FIFO 1 in one batch."""
        fifo2, lru, where = self._fifos[Queue.FIFO2], self._lru, self._where
        cap2 = self.capacity(Queue.FIFO2)
        while (key := fifo2.first()) is not None:
            since = where[key][1]
            if now_s - since < self.active_s and len(fifo2) <= cap2:
                break
            fifo2.pop_victims(1, now_s)
            lru[key] = None
            lru.move_to_end(key, last=False)
            where[key] = (Queue.LRU, since)
        excess = len(lru) - self.capacity(Queue.LRU)
        if excess > 0:
            demoted = [lru.popitem(last=False)[0] for _ in range(excess)]
            self._fifos[Queue.FIFO1].insert(demoted, _ONE_BLOCK, now_s)
            where.update(dict.fromkeys(demoted, (Queue.FIFO1, now_s)))

    def _pop_from(self, queue: Queue, want: int, strict: bool, out: list[K]) -> int:
        """Single blocks: `strict` cannot bind (a pop never passes `want`)."""
        if want <= 0:
            return 0
        if queue is Queue.LRU:
            popitem = self._lru.popitem
            victims = [popitem(False)[0] for _ in range(min(want, len(self._lru)))]
        else:
            victims = self._fifos[queue].pop_victims(want, 0.0)
        where = self._where
        for key in victims:
            del where[key]
        out.extend(victims)
        return len(victims)


def make_multi_queue(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.multi_queue
    capacities = {Queue.FIFO1: cfg.fifo1_capacity, Queue.LRU: cfg.lru_capacity, Queue.FIFO2: cfg.fifo2_capacity}

    def make_index(tier: IndexKind) -> MultiQueueIndex | MultiQueueBlockIndex:
        rules = dict(
            capacities=capacities,
            promotion_window_s=cfg.promotion_window_ms / 1000,
            water_level=cfg.evict_water_level,
            long_tokens=cfg.long_session_tokens,
            active_s=cfg.fifo2_active_ms / 1000,
        )
        if tier is IndexKind.BLOCKS:
            return MultiQueueBlockIndex(history_capacity=plan.num_blocks, **rules)
        return MultiQueueIndex(proportional=False, history_capacity=SESSION_HISTORY_CAPACITY, **rules)

    per_tick = max(1, math.floor(cfg.max_evict_per_tick_percent / 100 * plan.num_blocks))
    return Policy(
        "multi_queue",
        make_index,
        session_tick_s=cfg.tick_interval_ms / 1000,
        max_session_evict_blocks_per_tick=per_tick,
    )
