"""multi_queue: promotion, demotion, FIFO 2 protection, water-level shares, capacities."""

import pytest

from reference_engine.memory import MemoryPlan
from reference_engine.policies.base import EntryMeta, IndexKind
from reference_engine.policies.multi_queue import MultiQueueBlockIndex, MultiQueueIndex, Queue, make_multi_queue
from tests.helpers import access, small_config

NEW = EntryMeta()
LONG_ACTIVE = EntryMeta(tokens=5000, is_active=True)


def index(
    fifo1: int = 8, lru: int = 8, fifo2: int = 8, *, proportional: bool = False, water_level: float = 0.85
) -> MultiQueueIndex:
    return MultiQueueIndex(
        capacities={Queue.FIFO1: fifo1, Queue.LRU: lru, Queue.FIFO2: fifo2},
        proportional=proportional,
        promotion_window_s=5.0,
        water_level=water_level,
        long_tokens=4096,
        active_s=30.0,
        history_capacity=100,
    )


def block_index(fifo1: int = 8, lru: int = 8, fifo2: int = 8, *, water_level: float = 0.85) -> MultiQueueBlockIndex:
    return MultiQueueBlockIndex(
        capacities={Queue.FIFO1: fifo1, Queue.LRU: lru, Queue.FIFO2: fifo2},
        promotion_window_s=5.0,
        water_level=water_level,
        long_tokens=4096,
        active_s=30.0,
        history_capacity=100,
    )


# The blocks tier's two implementations: the general index with proportional capacities, and
# the one the engine uses there (queues with lazy deletion; tests/unit/policies/test_index_properties.py
# drives both side by side).
BLOCK_TIER = [
    pytest.param(lambda **kw: index(proportional=True, **kw), id="ordered-dicts"),
    pytest.param(block_index, id="lazy-queues"),
]


def test_new_entries_enter_fifo1_and_a_second_access_within_the_window_promotes_them():
    q = index()
    q.insert(["a", "b"], NEW, 0.0)
    assert q.queue_of("a") is Queue.FIFO1
    access(q, "a", 4.0)  # within 5 s
    access(q, "b", 6.0)  # too late: stays, with a new window
    assert (q.queue_of("a"), q.queue_of("b")) == (Queue.LRU, Queue.FIFO1)
    access(q, "b", 10.0)  # second access within the new window
    assert q.queue_of("b") is Queue.LRU


def test_a_prefix_hit_within_the_window_promotes_the_entry_when_it_comes_back():
    q = index()
    q.insert(["blk"], NEW, 0.0)
    q.remove("blk", 2.0)  # hit: live again
    assert "blk" not in q
    q.insert(["blk"], NEW, 50.0)  # released again, much later
    assert q.queue_of("blk") is Queue.LRU
    q.insert(["cold"], NEW, 50.0)
    q.remove("cold", 60.0)  # hit after the window: no promotion
    q.insert(["cold"], NEW, 61.0)
    assert q.queue_of("cold") is Queue.FIFO1


def test_long_active_entries_go_to_fifo2_and_are_evicted_last():
    q = index(water_level=1.0)
    q.insert(["long"], LONG_ACTIVE, 0.0)
    q.insert(["n1", "n2"], NEW, 1.0)
    q.insert(["hot"], NEW, 1.0)
    access(q, "hot", 2.0)
    assert q.queue_of("long") is Queue.FIFO2
    assert q.pop_victims(3, 3.0) == ["n1", "n2", "hot"]
    assert q.pop_victims(1, 3.0) == ["long"]
    # a long entry of a sequence that has ended is not protected
    q.insert(["ended"], EntryMeta(tokens=5000, is_active=False), 4.0)
    assert q.queue_of("ended") is Queue.FIFO1


def test_demotion_an_lru_entry_that_goes_cold_returns_to_fifo1():
    q = index(lru=2)
    for i, key in enumerate(["a", "b", "c"]):
        q.insert([key], NEW, float(i))
        access(q, key, float(i) + 0.5)
    # the LRU holds two: "a", the least recently used, went cold, back to FIFO 1 ...
    assert [q.queue_of(k) for k in "abc"] == [Queue.FIFO1, Queue.LRU, Queue.LRU]
    # ... with a fresh promotion window: re-accessed in time, it is promoted again (and "b" goes cold)
    access(q, "a", 3.0)
    assert [q.queue_of(k) for k in "abc"] == [Queue.LRU, Queue.FIFO1, Queue.LRU]


def test_demotion_a_fifo2_entry_whose_session_ended_goes_to_the_lru_cold_end():
    q = index()
    q.insert(["long"], LONG_ACTIVE, 0.0)
    q.insert(["warm"], NEW, 1.0)
    access(q, "warm", 2.0)
    q.pop_victims(0, 29.0)
    assert q.queue_of("long") is Queue.FIFO2  # accessed 29 s ago: still active
    q.pop_victims(0, 31.0)
    assert q.queue_of("long") is Queue.LRU  # 30 s without access: its session ended
    assert q.pop_victims(1, 31.0) == ["long"]  # at the cold end: before "warm"


def test_fifo2_overflow_demotes_its_oldest_entry():
    q = index(fifo2=1)
    q.insert(["l1"], LONG_ACTIVE, 0.0)
    q.insert(["l2"], LONG_ACTIVE, 1.0)
    assert (q.queue_of("l1"), q.queue_of("l2")) == (Queue.LRU, Queue.FIFO2)


@pytest.mark.parametrize("n, shares", [(1, (1, 0, 0)), (10, (9, 1, 0)), (100, (85, 13, 2))])
def test_the_water_level_splits_an_eviction_fifo1_fastest_fifo2_slowest(n, shares):
    assert index().shares(n) == shares


def test_each_queue_gives_its_share_and_what_one_cannot_give_passes_on():
    q = index(fifo1=100, lru=100, fifo2=100, water_level=0.5)
    q.insert([f"f{i}" for i in range(10)], NEW, 0.0)
    for i in range(10):
        q.insert([f"l{i}"], NEW, 0.0)
        access(q, f"l{i}", 0.1)
    q.insert([f"x{i}" for i in range(10)], LONG_ACTIVE, 0.2)
    victims = q.pop_victims(8, 1.0)  # shares 4 / 2 / 2
    assert [v[0] for v in victims] == ["f"] * 4 + ["l"] * 2 + ["x"] * 2
    q2 = index(water_level=0.5)
    q2.insert(["l0"], NEW, 0.0)
    access(q2, "l0", 0.1)
    q2.insert(["f0", "f1", "f2"], NEW, 0.2)
    assert q2.pop_victims(4, 1.0) == ["f0", "f1", "l0", "f2"]  # FIFO 2 is empty: its share back to FIFO 1


def test_a_strict_pop_never_exceeds_the_budget():
    q = index()
    q.insert(["s"], EntryMeta(size_blocks=2), 0.0)
    q.insert(["m"], EntryMeta(size_blocks=5), 0.0)
    assert q.pop_victims(6, 1.0, strict=True) == ["s"]
    assert q.pop_victims(4, 1.0, strict=True) == []


def test_sessions_tier_capacities_count_sessions_and_fifo1_overflow_is_evicted():
    q = index(fifo1=2)
    q.insert(["a", "b", "c"], NEW, 0.0)
    assert q.pop_overflow(0.0) == ["a"] and len(q) == 2


@pytest.mark.parametrize("make", BLOCK_TIER)
def test_blocks_tier_capacities_are_proportions_and_never_evict(make):
    q = make(fifo1=2, lru=2, fifo2=1)  # 40 % / 40 % / 20 %
    for i in range(10):
        q.insert([i], NEW, 0.0)
        access(q, i, 0.1)  # everything promoted ...
    assert q.num_in(Queue.LRU) == q.capacity(Queue.LRU) == 4  # ... but the LRU keeps its 40 %
    assert q.num_in(Queue.FIFO1) == 6 and q.pop_overflow(1.0) == [] and len(q) == 10


@pytest.mark.parametrize("make", BLOCK_TIER)
def test_blocks_tier_an_entry_demoted_to_fifo1_gets_a_fresh_promotion_window(make):
    q = make(fifo1=2, lru=2, fifo2=1)
    for i in range(10):
        q.insert([i], NEW, 10.0)
        access(q, i, 10.1)  # all promoted; the LRU keeps 4, the 6 coldest go back to FIFO 1 at 10.1
    demoted = [i for i in range(10) if q.queue_of(i) is Queue.FIFO1]
    assert demoted == [0, 1, 2, 3, 4, 5]
    access(q, 0, 14.0)  # 3.9 s after its demotion, 4 s after it first came: promoted again
    assert q.queue_of(0) is Queue.LRU
    access(q, 5, 16.0)  # 5.9 s after the demotion (still FIFO 1 after 0's return): not promoted
    assert q.queue_of(5) is Queue.FIFO1


def test_the_policy_ticks_and_caps_each_tick():
    config = small_config(
        1000, overrides={"multi_queue.tick_interval_ms": 250, "multi_queue.max_evict_per_tick_percent": 2.0}
    )
    policy = make_multi_queue(config, MemoryPlan.from_config(config))
    assert policy.session_tick_s == 0.25 and policy.max_session_evict_blocks_per_tick == 20
    assert isinstance(policy.make_index(IndexKind.BLOCKS), MultiQueueBlockIndex)
    assert policy.make_index(IndexKind.BLOCKS).proportional and not policy.make_index(IndexKind.SESSIONS).proportional
