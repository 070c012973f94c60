"""KV cache events from the engine core: every block the prefix cache can hit was announced
stored, every block it can no longer hit was announced removed, with the tokens that make it."""

from __future__ import annotations

from reference_engine.core.kv_events import BlockRemoved, BlockStored, KvEventLog
from tests.helpers import Driver, small_config

EVENTS = {"kv_events.enable_kv_cache_events": True}


def replayed_hashes(events: list) -> set[int]:
    """The engine hashes a reader of `events` believes are cached."""
    held: set[int] = set()
    for e in events:
        if isinstance(e, BlockStored):
            held.update(e.block_hashes)
        elif isinstance(e, BlockRemoved):
            held.difference_update(e.block_hashes)
    return held


def test_events_are_off_unless_the_config_asks():
    assert Driver(small_config()).core.kv_events is None


def test_stored_blocks_carry_their_tokens_and_chain_to_their_parent():
    d = Driver(small_config(**EVENTS))
    prompt = list(range(1000, 1100))  # 6 full blocks and 4 tokens
    r = d.add("acme", prompt_token_ids=prompt, max_new=30)  # 130 tokens: 8 full blocks by the end
    d.run()
    stored = [e for e in d.core.kv_events.drain() if isinstance(e, BlockStored)]
    hashes = [h for e in stored for h in e.block_hashes]
    assert hashes == r.block_hashes[: len(hashes)] and len(hashes) == 8
    assert stored[0].parent_block_hash is None and stored[0].token_ids == prompt[: 16 * len(stored[0].block_hashes)]
    for before, after in zip(stored, stored[1:]):
        assert after.parent_block_hash == before.block_hashes[-1]
    tokens = [t for e in stored for t in e.token_ids]
    assert tokens == (prompt + r.output_token_ids)[:128] and {e.block_size for e in stored} == {16}


def test_what_a_reader_of_the_events_holds_is_what_the_pool_can_hit():
    d = Driver(small_config(**EVENTS))  # 1,024 blocks: the later prompts evict the earlier ones
    log = d.core.kv_events
    seen: list = []
    for i in range(14):
        d.add("acme", prompt_token_ids=[i] * 1500, max_new=4)
        d.run()
        seen += log.drain()
        cached = {d.core.pool.block_hash(b) for b in range(d.core.pool.num_blocks)} - {None}
        assert replayed_hashes(seen) == cached
    assert any(isinstance(e, BlockRemoved) for e in seen)


def test_a_log_nobody_drains_keeps_the_newest_and_counts_the_rest():
    log = KvEventLog(block_size=16, max_pending=2)
    for h in range(3):
        log.removed([h])
    assert [e.block_hashes for e in log.drain()] == [[1], [2]] and log.num_dropped == 1 and log.num_events == 3
