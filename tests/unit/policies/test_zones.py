"""zones: the window rule rolls the oldest KV out, the free buffer evicts cached blocks ahead of
demand in LRU order, pinned prefixes survive both, and the warm zone is `lru` as configured."""

import numpy as np
import pytest

from reference_engine import ConfigError, EngineCore, EventKind
from reference_engine.policies.lru_queue import LruQueueIndex
from reference_engine.tokenizer import apply_chat_template
from tests.helpers import Driver, small_config, steps_of

WINDOW, BT, POOL = 64, 16, 1024
SYSTEM = "you are a careful assistant who answers every question in full sentences " * 4


def zones(**overrides) -> Driver:
    return Driver(
        small_config(
            POOL,
            overrides={
                "kv_cache.policy": "zones",
                "zones.sliding_window_tokens": WINDOW,
                "zones.free_buffer_percent": 25,
                **overrides,
            },
        )
    )


def test_a_long_history_rolls_its_oldest_kv_out_down_to_the_window():
    d = zones()
    r = d.add(prompt_len=100, max_new=60)
    compactions = 0
    for n_seen, compacted in steps_of(d, r):
        if compacted:  # no sinks: exactly the last WINDOW tokens, in order
            compactions += 1
            assert np.array_equal(r.kv_positions(), np.arange(n_seen - WINDOW, n_seen))
            assert d.core.snapshot().compacted_blocks == len(r.block_ids) == WINDOW // BT
        assert r.num_kv_tokens <= WINDOW + BT - 1  # a block's worth of slack at most
    assert compactions >= 3 and r.approximate
    events = [e for e in d.core.events if e.kind is EventKind.APPROXIMATED]
    assert len(events) == compactions and all(e.mode == "zones" for e in events)
    assert d.core.policy_stats().approximated_tokens == r.num_dropped_tokens
    d.core.pool.check_invariants()


def test_a_history_within_the_window_is_untouched_and_exact():
    d = zones()
    r = d.add(prompt_len=40, max_new=20)
    d.run()
    assert not r.approximate and r.num_dropped_tokens == 0
    assert d.core.snapshot().compacted_blocks == 0


def test_the_free_buffer_evicts_cached_blocks_ahead_of_demand_least_recent_first():
    d = zones(**{"zones.sliding_window_tokens": 4096})
    buffer = d.core.policy.free_buffer_blocks
    assert buffer == POOL // 4
    prompts = [[1_000_000 * (i + 1) + t for t in range(1600)] for i in range(8)]  # 100 blocks each
    for ids in prompts:
        d.add(prompt_token_ids=ids, max_new=4)
        d.run()
    stats = d.core.policy_stats()
    # 800 blocks went to the cached tier of a 1,024-block pool that keeps 256 free: the buffer
    # made room before any allocation had to, so it did every eviction
    assert stats.buffer_evicted_blocks > 0 and stats.evicted_cached_blocks == stats.buffer_evicted_blocks
    assert d.core.pool.num_free + d.core.pool.num_cached + d.core.pool.num_live == POOL
    oldest = d.add(prompt_token_ids=prompts[0] + [1], max_new=1)
    d.run()
    newest = d.add(prompt_token_ids=prompts[-1] + [1], max_new=1)
    d.run()
    # least recently used first, a chain from its end: every block the buffer took was the oldest prompt's
    assert oldest.num_prefix_hit_tokens == 1600 - stats.buffer_evicted_blocks * BT
    assert newest.num_prefix_hit_tokens == 1600
    d.core.pool.check_invariants()


def test_without_a_buffer_only_demand_evicts():
    d = zones(**{"zones.sliding_window_tokens": 4096, "zones.free_buffer_percent": 0})
    for i in range(8):
        d.add(prompt_token_ids=[1_000_000 * (i + 1) + t for t in range(1600)], max_new=4)
        d.run()
    stats = d.core.policy_stats()
    assert stats.buffer_evicted_blocks == 0 and d.core.pool.num_free < POOL // 4


def test_pinned_prefixes_survive_the_buffer_and_are_hit():
    prefix = [{"name": "system", "text": SYSTEM, "pinned": True}]
    d = zones(**{"zones.sliding_window_tokens": 4096, "prefix_cache.public_prefixes": prefix})
    d.core.pin_prefixes()
    pinned = d.core.snapshot().pinned_blocks
    assert pinned > 0
    system_ids = d.core.tokenizer.encode(apply_chat_template([{"role": "system", "content": SYSTEM}]))[:-1]
    for i in range(8):
        d.add(prompt_token_ids=[1_000_000 * (i + 1) + t for t in range(1600)], max_new=4)
        d.run()
    assert d.core.policy_stats().buffer_evicted_blocks > 0
    r = d.add(prompt_token_ids=system_ids + list(range(7, 207)), max_new=2)
    d.run()
    assert d.core.snapshot().pinned_blocks == pinned
    assert r.num_prefix_hit_tokens == pinned * BT
    d.core.pool.check_invariants()


def test_the_pinned_zone_keeps_its_hard_cap():
    prefix = [{"name": "system", "text": SYSTEM, "pinned": True}]
    overrides = {"kv_cache.policy": "zones", "kv_cache.pinned_max_percent": 0.2, "prefix_cache.public_prefixes": prefix}
    capped = small_config(POOL, overrides=overrides)
    with pytest.raises(ConfigError, match="would pass kv_cache.pinned_max_percent"):
        EngineCore(capped).pin_prefixes()


def test_the_warm_zone_is_lru_as_configured():
    policy = zones().core.policy
    assert policy.touch_on_decode and isinstance(zones().core.pool._cached, LruQueueIndex)
    assert not zones(**{"lru.touch_on_decode": False}).core.policy.touch_on_decode


def test_a_window_that_does_not_match_the_models_own_is_a_config_error():
    mistral = {"model.name": "mistral-7b-v0.1", "kv_cache.policy": "zones"}
    with pytest.raises(ConfigError, match="zones.sliding_window_tokens = 2048 does not match .* set it to 4096"):
        EngineCore(small_config(overrides={**mistral, "zones.sliding_window_tokens": 2048}))
    EngineCore(small_config(overrides={**mistral, "zones.sliding_window_tokens": 4096}))


def pool_after_each_plan(fused: bool) -> dict[float, tuple[int, int]]:
    """(cached, free) blocks at the end of every plan, by its end time, while one long decode
    grows past the buffer's edge with the cached tier full of old prompts."""
    d = zones(**{"zones.sliding_window_tokens": 4096})
    for i in range(7):  # 700 cached blocks: free sits just above the 256-block buffer
        d.add(prompt_token_ids=[1_000_000 * (i + 1) + t for t in range(1600)], max_new=4)
        d.run()
    d.add(prompt_len=16, max_new=1500)  # a block every 16 steps: ~94 blocks
    ends = {}
    while d.core.has_work():
        out = d.step(float("inf") if fused else None)
        ends[out.t_end_s] = (d.core.pool.num_cached, d.core.pool.num_free)
    assert d.core.policy_stats().buffer_evicted_blocks > 0
    return ends


def test_plans_held_for_several_steps_evict_for_the_buffer_at_each_steps_start():
    fused, stepped = pool_after_each_plan(True), pool_after_each_plan(False)
    assert len(fused) < len(stepped) / 10  # plans really held
    assert fused == {t: stepped[t] for t in fused}
