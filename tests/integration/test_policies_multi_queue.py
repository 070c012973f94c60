"""multi_queue in the engine: the evict rung runs on a tick, each tick within its share of the pool,
and long active sessions (FIFO 2) outlive short ones."""

import zlib
from collections import defaultdict

from reference_engine import EventKind
from tests.helpers import Driver, small_config

SPREAD_GUARD = {
    "warn_at_percent": 50,
    "admission_at_percent": 60,
    "evict_at_percent": 70,
    "pause_batch_prefill_at_percent": 80,
    "preempt_at_percent": 90,
    "reject_at_percent": 99,
}


def session(d: Driver, name: str, words: int) -> None:
    salt = zlib.crc32(name.encode()) * 10_000
    d.add(prompt_token_ids=[salt + i for i in range(words)], max_new=8, session_id=name)
    d.run()


def pressure_run(**overrides) -> Driver:
    """23 idle sessions hold 690 of 1,024 blocks (just under the evict rung, 716); then an 8,800-token
    prompt prefills 256 tokens a step, far faster than the rung may evict."""
    d = Driver(
        small_config(
            1024,
            overrides={
                "kv_cache.policy": "multi_queue",
                "kv_cache.guard": SPREAD_GUARD,
                "tenants.acme.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                "multi_queue.tick_interval_ms": 200,
                "multi_queue.max_evict_per_tick_percent": 10.0,
                **overrides,
            },
        )
    )
    for i in range(23):
        session(d, f"s{i}", 473 if i % 2 else 313)  # 480 or 320 tokens with KV: 30 or 20 full blocks
    assert d.core.snapshot().retained_blocks == 12 * 20 + 11 * 30
    d.add(tenant="globex", prompt_len=8800, max_new=8)
    d.run()
    return d


def test_no_tick_evicts_more_than_its_share_of_the_pool():
    d = pressure_run()
    per_tick: dict[float, list[int]] = defaultdict(list)
    for e in d.core.events:
        if e.kind is EventKind.EVICTED and e.reason == "watermark":
            per_tick[e.t_s].append(e.num_blocks)
    cap = d.core.policy.max_session_evict_blocks_per_tick
    assert cap == 102 and len(per_tick) >= 2
    for blocks in per_tick.values():
        assert sum(blocks) <= cap or len(blocks) == 1
    assert max(len(b) for b in per_tick.values()) >= 2  # the cap, not the session size, limited a tick
    ticks = sorted(per_tick)
    assert all(b - a >= 0.2 - 1e-9 for a, b in zip(ticks, ticks[1:]))  # one tick per tick_interval_ms


def test_long_active_sessions_sit_in_fifo2_and_outlive_short_ones():
    d = pressure_run(**{"multi_queue.long_session_tokens": 400})
    evicted = [e.request_id for e in d.core.events if e.kind is EventKind.EVICTED]
    short = {f"s{i}" for i in range(0, 23, 2)}
    assert evicted and set(evicted[: len(short)]) <= short  # FIFO 1 (short) drains before FIFO 2 (long)
    survivors = [s for s in d.core.sessions if s.is_retained]
    assert survivors and all(s.session_id not in short for s in survivors)
