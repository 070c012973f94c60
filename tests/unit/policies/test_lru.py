"""lru: eviction order on hand-built access sequences, both recency clocks, session capacity."""

import random

from reference_engine.memory import MemoryPlan
from reference_engine.policies.base import EntryMeta, IndexKind, LruIndex
from reference_engine.policies.lru import RecencyIndex, make_lru
from reference_engine.policies.lru_queue import LruQueueIndex
from tests.helpers import access, small_config

ONE = EntryMeta()


def test_lru_evicts_least_recently_used_first_and_a_chain_from_its_tail():
    index = LruIndex()
    index.insert(["c3", "c2", "c1"], ONE, 0.0)  # a released chain: tail first
    index.insert(["x"], ONE, 1.0)
    access(index, "c2", 2.0)
    index.remove("c1", 3.0)  # a prefix hit: live again
    assert index.pop_victims(2, 4.0) == ["c3", "x"]
    assert index.pop_victims(5, 4.0) == ["c2"] and len(index) == 0


def test_a_strict_pop_never_exceeds_its_budget():
    index = LruIndex()
    index.insert(["small"], EntryMeta(size_blocks=3), 0.0)
    index.insert(["big"], EntryMeta(size_blocks=10), 1.0)
    assert index.pop_victims(8, 2.0, strict=True) == ["small"]  # "big" would pass 8
    assert index.pop_victims(8, 2.0, strict=True) == []
    assert index.pop_victims(8, 2.0) == ["big"]  # not strict: until covered


def test_overflow_pops_the_oldest_in_batches():
    index = LruIndex(max_entries=4, overflow_batch=3)
    index.insert([f"s{i}" for i in range(4)], ONE, 0.0)
    assert index.pop_overflow(0.0) == []
    index.insert(["s4"], ONE, 1.0)
    assert index.pop_overflow(1.0) == ["s0", "s1", "s2"]  # one over the cap: a whole batch goes
    assert len(index) == 2


def test_an_overflow_batch_larger_than_the_index_empties_it_without_failing():
    # [lru] max_entries = 1 with the default evict_batch_size 32: two idle sessions, both go
    for index in (LruIndex(max_entries=1, overflow_batch=32), RecencyIndex(max_entries=1, overflow_batch=32)):
        index.insert(["a", "b"], ONE, 0.0)
        assert sorted(index.pop_overflow(1.0)) == ["a", "b"] and len(index) == 0


def test_without_touch_on_decode_recency_is_the_last_scheduling():
    index = RecencyIndex()
    # released in this order, but "late" was scheduled long before "early" finished decoding
    index.insert(["early"], EntryMeta(last_access_s=5.0), 10.0)
    index.insert(["late"], EntryMeta(last_access_s=1.0), 11.0)
    index.insert(["now"], ONE, 12.0)  # no last access given: now
    assert index.pop_victims(1, 13.0) == ["late"]
    access(index, "early", 14.0)
    assert index.pop_victims(2, 15.0) == ["now", "early"]


def test_the_lru_policy_maps_its_seed_keys():
    config = small_config(overrides={"lru.max_entries": 7, "lru.evict_batch_size": 2, "lru.touch_on_decode": False})
    policy = make_lru(config, MemoryPlan.from_config(config))
    sessions, blocks = policy.make_index(IndexKind.SESSIONS), policy.make_index(IndexKind.BLOCKS)
    assert isinstance(sessions, RecencyIndex) and (sessions.max_entries, sessions.overflow_batch) == (7, 2)
    assert blocks.max_entries is None and not policy.touch_on_decode
    default = make_lru(small_config(), MemoryPlan.from_config(small_config()))
    assert isinstance(default.make_index(IndexKind.BLOCKS), LruQueueIndex) and not default.approximate
    assert isinstance(default.make_index(IndexKind.SESSIONS), LruIndex)


def test_the_blocks_queue_compacts_and_drops_stale_copies_without_changing_the_order(monkeypatch):
    """Thousands of hits and evictions with tiny compaction thresholds: the queue's order stays
    the list model's, and its dead slots stay bounded."""
    from reference_engine.policies import lru_queue
    from tests.unit.policies.test_index_properties import ListLru

    monkeypatch.setattr(lru_queue, "_COMPACT_AT", 4)
    index, model, present, rng = LruQueueIndex(), ListLru(), set(), random.Random(7)
    meta = EntryMeta()
    for step in range(5000):
        op = rng.random()
        if op < 0.45:
            keys = [k for k in rng.sample(range(40), 3) if k not in present]
            index.insert(keys, meta, step)
            model.insert(keys, meta, step)
            present.update(keys)
        elif op < 0.8 and present:
            key = rng.choice(sorted(present))
            index.remove(key, step)
            model.remove(key, step)
            present.discard(key)
        else:
            n = rng.randint(0, 5)
            victims = index.pop_victims(n, step)
            assert victims == model.pop(n, False, step)
            present.difference_update(victims)
        assert len(index) == len(present)
        assert len(index._queue) - index._head <= 2 * max(len(present), 4) + 4
    assert all(k in index for k in present) and not any(k in index for k in set(range(40)) - present)
