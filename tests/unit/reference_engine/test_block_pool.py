from reference_engine.core.block_pool import BlockPool
from reference_engine.policies.base import LruIndex


def make_pool(n=8):
    return BlockPool(n, 16, LruIndex())


def test_allocate_and_free_return_blocks_to_the_free_stack():
    pool = make_pool()
    blocks = pool.allocate(3, "acme", 0.0)
    assert len(blocks) == 3 and pool.num_live == 3 and pool.num_free == 5
    assert pool.live_by_tenant["acme"] == 3
    assert pool.decref(blocks, 1.0) == 3
    assert pool.num_live == 0 and pool.num_free == 8 and pool.live_by_tenant["acme"] == 0
    pool.check_invariants()


def test_allocation_that_cannot_be_served_returns_none_and_is_counted():
    pool = make_pool(4)
    assert pool.allocate(5, "acme", 0.0) is None
    assert pool.num_alloc_failures == 1 and pool.num_free == 4
    pool.check_invariants()


def test_hashed_blocks_become_cached_and_are_found_again():
    pool = make_pool()
    a, b = pool.allocate(2, "acme", 0.0)
    assert pool.register(a, 111) and pool.register(b, 222)
    pool.decref([a, b], 1.0)
    assert pool.num_cached == 2 and pool.num_live == 0
    assert pool.match_prefix([111, 222, 333]) == [a, b]
    pool.incref([a, b], 2.0)
    assert pool.num_cached == 0 and pool.num_live == 2 and pool.ref_count(a) == 1
    pool.check_invariants()


def test_prefix_match_stops_at_first_miss():
    pool = make_pool()
    a, b = pool.allocate(2, "acme", 0.0)
    pool.register(a, 1)
    pool.register(b, 3)
    assert pool.match_prefix([1, 2, 3]) == [a]


def test_shared_block_is_released_only_when_refcount_reaches_zero():
    pool = make_pool()
    (a,) = pool.allocate(1, "acme", 0.0)
    pool.register(a, 7)
    pool.incref([a], 0.0)  # a second request hits it
    assert pool.decref([a], 1.0) == 0 and pool.ref_count(a) == 1
    assert pool.decref([a], 1.0) == 1 and pool.is_cached(a)
    pool.check_invariants()


def test_cached_blocks_are_evicted_lru_when_free_runs_out():
    pool = make_pool(4)
    blocks = pool.allocate(4, "acme", 0.0)
    for i, blk in enumerate(blocks):
        pool.register(blk, 100 + i)
    pool.decref(blocks[:2], 1.0)  # first chain: cached, tail first
    pool.decref(blocks[2:], 2.0)
    new = pool.allocate(1, "globex", 3.0)
    # the tail of the oldest chain goes first, so the chain's head stays findable
    assert new == [blocks[1]] and pool.num_evicted_cached == 1
    assert pool.match_prefix([100]) == [blocks[0]]
    assert pool.block_tenant(new[0]) == "globex" and pool.block_hash(new[0]) is None
    pool.check_invariants()


def test_duplicate_content_is_not_registered_twice():
    pool = make_pool()
    a, b = pool.allocate(2, "acme", 0.0)
    assert pool.register(a, 5)
    assert not pool.register(b, 5)
    assert pool.cached_block(5) == a


def test_retained_blocks_count_only_when_held_exclusively():
    pool = make_pool()
    a, b = pool.allocate(2, "acme", 0.0)
    pool.register(a, 1)
    pool.register(b, 2)
    pool.incref([a, b], 0.0, hold=True)  # a session retains them
    assert pool.num_retained == 0  # the running request still references them
    pool.decref([a, b], 1.0)  # the request finishes
    assert pool.num_retained == 2 and pool.num_live == 2
    pool.incref([a], 2.0)  # the next turn hits the first block
    assert pool.num_retained == 1
    pool.decref([a, b], 3.0, hold=True)  # the session lets go
    assert pool.num_retained == 0 and pool.num_live == 1
    pool.check_invariants()


def test_public_blocks_belong_to_no_tenant():
    pool = make_pool()
    pool.allocate(2, None, 0.0)
    pool.allocate(1, "acme", 0.0)
    assert pool.live_by_tenant == {None: 2, "acme": 1}
