"""Every eviction index keeps its invariants under random insert / remove / pop sequences.

Each index is driven side by side with a brute-force reference model (a list or a dict scanned
for its minimum): the membership must always agree, pops must cover what was asked (or stay
within it when strict), and where the order is fully defined (lru, recency, value_density) the
victims must be exactly the model's. multi_queue is checked for its structural invariants.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from reference_engine.policies.base import EntryMeta, LruIndex
from reference_engine.policies.lru import RecencyIndex
from reference_engine.policies.lru_queue import LruQueueIndex
from reference_engine.policies.multi_queue import MultiQueueBlockIndex, MultiQueueIndex, Queue
from reference_engine.policies.value_density import MIB, ValueDensityIndex

KEYS = st.integers(0, 11)
DT = st.floats(0.0, 4.0)
OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.lists(KEYS, min_size=1, max_size=3, unique=True),
            st.integers(1, 4),
            st.integers(0, 3),
            DT,
        ),
        st.tuples(st.just("remove"), KEYS, DT),
        st.tuples(st.just("pop"), st.integers(0, 9), st.booleans(), DT),
        st.tuples(st.just("overflow"), DT),
    ),
    max_size=80,
)


def _meta(size: int, kind: int, now: float) -> EntryMeta:
    """kind 0: plain; 1: long and active (FIFO 2); 2: scheduled earlier (recency); 3: costly."""
    return EntryMeta(
        size_blocks=size,
        tokens=5000 if kind == 1 else 10,
        is_active=kind == 1,
        last_access_s=now - 3.0 if kind == 2 else None,
        saved_prefill_s=0.001 * (1 + 9 * (kind == 3)),
    )


class ListLru:
    """LRU as a plain list, oldest first."""

    def __init__(self) -> None:
        self.order: list[tuple[int, int]] = []

    def insert(self, keys, meta, now):
        self.order += [(k, meta.size_blocks) for k in keys]

    def remove(self, key, now):
        self.order = [(k, s) for k, s in self.order if k != key]

    def pop(self, n, strict, now):
        out, freed = [], 0
        while freed < n and self.order:
            if strict and freed + self.order[0][1] > n:
                break
            k, s = self.order.pop(0)
            out.append(k)
            freed += s
        return out


class MinScan:
    """Entries with a priority, the minimum (then the oldest stamp) popped by a full scan."""

    def __init__(self) -> None:
        self.entries: dict[int, list] = {}  # key -> [priority, stamp, size]
        self.stamp = 0

    def put(self, key, priority, size):
        self.stamp += 1
        self.entries[key] = [priority, self.stamp, size]

    def pop(self, n, strict, now):
        out, freed = [], 0
        while freed < n and self.entries:
            key = min(self.entries, key=lambda k: self.entries[k][:2])
            if strict and freed + self.entries[key][2] > n:
                break
            out.append(key)
            freed += self.entries[key][2]
            self.evicted(key, self.entries.pop(key)[0])
        return out

    def evicted(self, key, priority):
        pass


class MinScanRecency(MinScan):
    def insert(self, keys, meta, now):
        for k in keys:
            self.put(k, now if meta.last_access_s is None else meta.last_access_s, meta.size_blocks)

    def remove(self, key, now):
        del self.entries[key]


class MinScanValueDensity(MinScan):
    """GDSF written out plainly: priority = L + (prior + decayed hits) × saved ms / MiB."""

    HALF_LIFE, PRIOR, MIB_PER_BLOCK = 5.0, 1.0, 2.0

    def __init__(self) -> None:
        super().__init__()
        self.L = 0.0
        self.reuse: dict[int, list] = {}  # key -> [hits, at, saved_ms]
        self.history: dict[int, list] = {}

    def _hits(self, r, now):
        return r[0] * 0.5 ** (max(0.0, now - r[1]) / self.HALF_LIFE)

    def _put(self, key, size, now):
        r = self.reuse[key]
        self.put(key, self.L + (self.PRIOR + self._hits(r, now)) * r[2] / (size * self.MIB_PER_BLOCK), size)

    def insert(self, keys, meta, now):
        for k in keys:
            r = self.history.pop(k, None) or [0.0, now, 0.0]
            r[2] = meta.saved_prefill_s * 1000
            self.reuse[k] = r
            self._put(k, meta.size_blocks, now)

    def remove(self, key, now):
        del self.entries[key]
        r = self.reuse.pop(key)
        r[0], r[1] = self._hits(r, now) + 1.0, now
        self.history[key] = r

    def evicted(self, key, priority):
        del self.reuse[key]
        self.L = priority


def run(index, ops, model=None, check=None) -> None:
    present: dict[int, int] = {}  # key -> size
    now = 0.0
    for op in ops:
        now += op[-1]
        kind = op[0]
        if kind == "insert":
            keys = [k for k in op[1] if k not in present]
            if not keys:
                continue
            meta = _meta(op[2], op[3], now)
            index.insert(keys, meta, now)
            if model:
                model.insert(keys, meta, now)
            present.update(dict.fromkeys(keys, op[2]))
        elif kind == "remove":
            if op[1] not in present:
                continue
            index.remove(op[1], now)
            if model:
                model.remove(op[1], now)
            del present[op[1]]
        elif kind == "pop":
            n, strict = op[1], op[2]
            victims = index.pop_victims(n, now, strict=strict)
            if model:
                assert victims == model.pop(n, strict, now)
            assert len(set(victims)) == len(victims) and all(v in present for v in victims)
            freed = sum(present.pop(v) for v in victims)
            assert freed <= n if strict else (freed >= n or not present)
        else:
            for v in index.pop_overflow(now):
                del present[v]
        assert len(index) == len(present) and all(k in index for k in present)
        if check:
            check(index, kind)


SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(OPS)
def test_lru_index_matches_a_list(ops):
    run(LruIndex(), ops, ListLru())


def _unit_sizes(ops):
    return [(op[0], op[1], 1, *op[3:]) if op[0] == "insert" else op for op in ops]


@SETTINGS
@given(OPS.map(_unit_sizes))
def test_lru_queue_index_matches_a_list(ops):
    """The blocks tier's queue (single blocks) orders exactly like the list, stale copies and all."""
    run(LruQueueIndex(), ops, ListLru())


@SETTINGS
@given(OPS)
def test_recency_index_matches_a_min_scan(ops):
    run(RecencyIndex(), ops, MinScanRecency())


@SETTINGS
@given(OPS)
def test_value_density_index_matches_a_min_scan(ops):
    vd = ValueDensityIndex(bytes_per_block=2 * MIB, half_life_s=5.0, prior_reuse=1.0, history_capacity=1000)
    run(vd, ops, MinScanValueDensity())


def _multi_queue_invariants(q: MultiQueueIndex, kind: str) -> None:
    assert sum(q.num_in(x) for x in Queue) == len(q)
    # Capacities hold after every insert; shrinking the index (remove, pop) can leave
    # a proportional queue over its share until the next operation rebalances it.
    if kind == "insert" or (not q.proportional and kind != "remove"):
        assert q.num_in(Queue.LRU) <= q.capacity(Queue.LRU)
        assert q.num_in(Queue.FIFO2) <= q.capacity(Queue.FIFO2)


@SETTINGS
@given(OPS, st.booleans())
def test_multi_queue_index_keeps_its_structure(ops, proportional):
    q = MultiQueueIndex(
        capacities={Queue.FIFO1: 3, Queue.LRU: 3, Queue.FIFO2: 2},
        proportional=proportional,
        promotion_window_s=3.0,
        water_level=0.6,
        long_tokens=4096,
        active_s=6.0,
        history_capacity=5,
    )
    run(q, ops, check=_multi_queue_invariants)


class MultiQueueModel:
    """`MultiQueueIndex` (three `OrderedDict`s) as the reference for the blocks tier's index."""

    def __init__(self, **rules) -> None:
        self.index = MultiQueueIndex(proportional=True, **rules)

    def insert(self, keys, meta, now):
        self.index.insert(keys, meta, now)

    def remove(self, key, now):
        self.index.remove(key, now)

    def pop(self, n, strict, now):
        return self.index.pop_victims(n, now, strict=strict)


# Fewer keys and shorter gaps than OPS: hits inside the promotion window, promotions, LRU
# overflow (demotions to FIFO 1) and hits soon after them all happen often.
BLOCK_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
            st.just(1),
            st.integers(0, 1),
            st.floats(0.0, 1.5),
        ),
        st.tuples(st.just("remove"), st.integers(0, 7), st.floats(0.0, 1.5)),
        st.tuples(st.just("pop"), st.integers(0, 4), st.booleans(), st.floats(0.0, 1.5)),
    ),
    max_size=120,
)


@settings(max_examples=400, deadline=None)
@given(BLOCK_OPS)
def test_multi_queue_block_index_matches_the_ordered_dict_index(ops):
    """Same victims after every pop, and every key in the same queue after every operation:
    FIFO 1 and FIFO 2 as queues with lazy deletion change the cost, not the policy."""
    rules = dict(
        capacities={Queue.FIFO1: 3, Queue.LRU: 3, Queue.FIFO2: 2},
        promotion_window_s=3.0,
        water_level=0.6,
        long_tokens=4096,
        active_s=6.0,
        history_capacity=5,
    )
    index, model = MultiQueueBlockIndex(**rules), MultiQueueModel(**rules)

    def same_queues(q: MultiQueueBlockIndex, kind: str) -> None:
        assert [q.queue_of(k) for k in range(8)] == [model.index.queue_of(k) for k in range(8)]
        assert [q.num_in(x) for x in Queue] == [model.index.num_in(x) for x in Queue]

    run(index, ops, model, check=same_queues)


def test_heap_indexes_keep_their_order_across_rebuilds(monkeypatch):
    """Rebuilding the heap from the live keys (forced after every push here) keeps each item's
    keys in push order: the victims stay exactly the min-scan models'."""
    from reference_engine.policies import heap_index

    monkeypatch.setattr(heap_index, "_REBUILD_SLACK", 0)
    rng = random.Random(3)
    for _ in range(40):
        ops = []
        for _ in range(60):
            kind = rng.choice(["insert", "insert", "remove", "pop"])
            if kind == "insert":
                ops.append(
                    (
                        "insert",
                        rng.sample(range(12), rng.randint(1, 3)),
                        rng.randint(1, 4),
                        rng.randint(0, 3),
                        rng.uniform(0, 4),
                    )
                )
            elif kind == "remove":
                ops.append(("remove", rng.randrange(12), rng.uniform(0, 4)))
            else:
                ops.append(("pop", rng.randrange(10), rng.random() < 0.5, rng.uniform(0, 4)))
        run(RecencyIndex(), ops, MinScanRecency())
        vd = ValueDensityIndex(bytes_per_block=2 * MIB, half_life_s=5.0, prior_reuse=1.0, history_capacity=1000)
        run(vd, ops, MinScanValueDensity())
