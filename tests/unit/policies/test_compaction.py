"""Token-level compaction: blocks freed, hashes kept only where content stays, data really moved."""

import numpy as np

from reference_engine.policies.base import EntryMeta
from tests.helpers import Driver, small_config


def test_compaction_frees_the_blocks_left_over_and_unregisters_the_rewritten_ones():
    d = Driver(small_config())
    r = d.add(prompt_len=100, max_new=8)
    d.step()  # prefill: 100 tokens, 6 full blocks registered
    kv, pool = d.core.kv, d.core.pool
    blocks = list(r.block_ids)
    assert all(pool.block_hash(b) is not None for b in blocks[:6])
    keep = np.concatenate((np.arange(40), np.arange(70, 100)))  # tokens 40..69 dropped
    live_before = pool.num_live
    move, released = kv.compact(r, keep, 1.0, EntryMeta())
    assert (r.num_kv_tokens, r.num_dropped_tokens, r.approximate) == (70, 30, True)
    assert r.block_ids == blocks[:5] and released == 2 and pool.num_live == live_before - 2
    # blocks 0-1 keep their content (tokens 0..31) and hashes; block 2 onwards receives moved tokens
    assert [pool.block_hash(b) is not None for b in blocks[:5]] == [True, True, False, False, False]
    assert pool.is_cached(blocks[5]) and not pool.is_cached(blocks[6])  # exact full block vs partial tail
    assert move.dst_start == 40 and list(move.src) == list(range(70, 100)) and move.block_ids == blocks
    assert np.array_equal(r.kv_positions(), keep)
    pool.check_invariants()


def test_the_shared_prefix_is_what_other_references_hold():
    d = Driver(small_config())
    ids = list(range(1_000, 1_100))
    a = d.add(prompt_token_ids=ids, max_new=40)
    d.step()
    b = d.add(prompt_token_ids=ids[:64] + [7] * 50, max_new=4)
    d.step()  # b hits a's first 4 blocks while a is running
    assert b.num_prefix_hit_tokens == 64
    assert d.core.kv.shared_prefix_tokens(a) == 64 and d.core.kv.shared_prefix_tokens(b) == 64


def test_the_shared_prefix_answer_follows_every_reference_change():
    """shared_prefix_tokens keeps its answer while the pool's sharing epoch stands: each way a
    block gains or loses a second reference must move the epoch."""
    d = Driver(small_config())
    kv, ids = d.core.kv, list(range(2_000, 2_100))
    a = d.add(prompt_token_ids=ids, max_new=40)
    d.step()
    assert kv.shared_prefix_tokens(a) == 0
    b = d.add(prompt_token_ids=ids[:64] + [7] * 50, max_new=2)
    d.step()  # a prefix hit: a's first 4 blocks gain a reference
    assert kv.shared_prefix_tokens(a) == 64
    while not b.is_finished:
        d.step()  # b's release: they lose it again
    assert kv.shared_prefix_tokens(a) == 0
    d.core.pool.incref(a.block_ids[:2], 0.0, hold=True)  # a hold (a session or a pin)
    assert kv.shared_prefix_tokens(a) == 32
    d.core.pool.decref(a.block_ids[:2], 0.0, hold=True)
    assert kv.shared_prefix_tokens(a) == 0


def test_the_first_moved_token_is_found_by_bisection():
    from reference_engine.core.kv_manager import _first_moved

    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        keep = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
        moved = np.flatnonzero(keep != np.arange(len(keep)))
        assert _first_moved(keep) == (int(moved[0]) if len(moved) else len(keep))
    assert _first_moved(np.arange(0)) == 0 and _first_moved(np.arange(5)) == 5
