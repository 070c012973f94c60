"""streamingllm: exactly sinks + window after every compaction, shared prefixes kept, alignment."""

import zlib

import numpy as np
import pytest

from reference_engine import ConfigError, EngineCore, EventKind
from tests.helpers import Driver, small_config, steps_of

SINKS, WINDOW, BT = 4, 64, 16


def streaming(**overrides) -> Driver:
    return Driver(
        small_config(
            overrides={
                "kv_cache.policy": "streamingllm",
                "streamingllm.sink_tokens": SINKS,
                "streamingllm.sliding_window_tokens": WINDOW,
                **overrides,
            }
        )
    )


def test_a_long_sequence_keeps_exactly_its_sinks_and_window():
    d = streaming()
    r = d.add(prompt_len=100, max_new=60)
    compactions = 0
    for n_seen, compacted in steps_of(d, r):
        if compacted:  # exactly sinks + window
            compactions += 1
            expected = np.concatenate((np.arange(SINKS), np.arange(n_seen - WINDOW, n_seen)))
            assert np.array_equal(r.kv_positions(), expected)
            assert len(r.block_ids) == -(-(SINKS + WINDOW) // BT)
        assert r.num_kv_tokens <= SINKS + WINDOW + BT - 1  # a block's worth of slack at most
    assert compactions >= 3 and r.approximate
    events = [e for e in d.core.events if e.kind is EventKind.APPROXIMATED]
    assert len(events) == compactions and all(e.mode == "streamingllm" for e in events)
    assert sum(e.num_tokens for e in events) == d.core.policy_stats().approximated_tokens == r.num_dropped_tokens
    d.core.pool.check_invariants()
    assert d.core.pool.num_live == 0


def test_short_sequences_are_untouched_and_exact():
    d = streaming()
    r = d.add(prompt_len=40, max_new=20)
    d.run()
    assert not r.approximate and r.num_dropped_tokens == 0


def test_a_prefix_a_session_still_holds_is_kept_in_place():
    d = streaming()
    salt = zlib.crc32(b"s") * 10_000
    first = d.add(prompt_token_ids=[salt + i for i in range(60)], max_new=8, session_id="s")
    d.run()  # 68 tokens: not compressed; the session holds its 4 full blocks
    assert not first.approximate and d.core.snapshot().retained_blocks == 4
    history = first.prompt_token_ids + first.output_token_ids
    second = d.add(prompt_token_ids=history + [salt + 1000 + i for i in range(100)], max_new=4, session_id="s")
    d.step()
    assert second.num_prefix_hit_tokens == 64 and second.approximate
    kept = second.kv_positions()
    assert np.array_equal(kept[:64], np.arange(64))  # the held prefix replaces the sinks
    assert np.array_equal(kept[64:], np.arange(second.num_computed_tokens - WINDOW, second.num_computed_tokens))
    d.run()
    d.core.pool.check_invariants()


def test_a_window_that_does_not_match_the_models_own_is_a_config_error():
    mistral = {"model.name": "mistral-7b-v0.1", "kv_cache.policy": "streamingllm"}
    with pytest.raises(
        ConfigError, match="does not match the attention window of mistral-7b-v0.1 .4096 tokens.; set it to 4096"
    ):
        EngineCore(small_config(overrides={**mistral, "streamingllm.sliding_window_tokens": 2048}))
    aligned = EngineCore(small_config(overrides={**mistral, "streamingllm.sliding_window_tokens": 4096}))
    assert aligned.policy.approximate


def test_evict_outside_window_false_keeps_everything():
    d = streaming(**{"streamingllm.evict_outside_window": False})
    r = d.add(prompt_len=200, max_new=8)
    d.run()
    assert not d.core.policy.approximate and not r.approximate
