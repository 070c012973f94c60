"""Multi-turn sessions: KV kept between turns, explicit expiry, eviction under pressure."""

import zlib

import pytest

from reference_engine import CapacityError, ContextExpiredError, EventKind
from tests.helpers import Driver, small_config


def turn(d: Driver, session: str, history: list[int], new_words: int, max_new: int = 8, **kw):
    salt = zlib.crc32(session.encode()) * 10_000
    ids = history + [salt + len(history) + i for i in range(new_words)]
    r = d.add(prompt_token_ids=ids, max_new=max_new, session_id=session, **kw)
    d.run()
    return r, ids + r.output_token_ids


def test_second_turn_hits_the_blocks_the_session_retained(driver):
    r1, history = turn(driver, "s1", [], 100)
    snap = driver.core.snapshot()
    # 100 prompt + 8 output tokens = 6 full blocks retained between turns, counted as live
    assert snap.retained_blocks == 6 and snap.live_blocks == 6
    r2, _ = turn(driver, "s1", history, 20)
    assert r2.num_prefix_hit_tokens == 96 and not r2.session_rebuilt


def test_idle_session_expires_and_a_non_rebuildable_turn_gets_410():
    d = Driver(small_config(overrides={"kv_cache.max_session_idle_seconds": 5}))
    _, history = turn(d, "s1", [], 100, session_rebuildable=False)
    d.clock.advance(6)
    d.core.step()  # housekeeping notices the idle timeout
    assert [e.reason for e in d.core.events if e.kind is EventKind.EXPIRED] == ["idle_timeout"]
    assert d.core.snapshot().live_blocks == 0
    with pytest.raises(ContextExpiredError) as err:
        d.add(prompt_token_ids=history + [1, 2, 3], session_id="s1", session_rebuildable=False)
    assert err.value.status == 410 and err.value.code == "context_expired"


def test_expired_rebuildable_session_is_rebuilt_and_says_so():
    d = Driver(small_config(overrides={"kv_cache.max_session_idle_seconds": 5}))
    _, history = turn(d, "s1", [], 100)
    d.clock.advance(6)
    d.core.step()
    r2, _ = turn(d, "s1", history, 10)
    assert r2.session_rebuilt  # the client is told; the prefix was re-prefilled
    assert d.core.sessions.get("acme", "s1").rebuilds == 1


def test_session_over_its_token_cap_is_not_retained():
    d = Driver(small_config(overrides={"kv_cache.max_tokens_per_session": 64}))
    turn(d, "s1", [], 100)
    assert d.core.snapshot().retained_blocks == 0
    assert d.core.sessions.get("acme", "s1").end_reason == "session_cap"


def test_sessions_are_evicted_at_the_evict_watermark_lowest_class_first():
    d = Driver(small_config(1024, overrides={"tenants.acme.max_kv_share": 1.0, "tenants.batchco.max_kv_share": 1.0}))
    # eight idle sessions of 60 blocks each: 480 blocks retained, interactive and batch alike
    for i in range(4):
        turn(d, f"a{i}", [], 960, max_new=8)
        turn(d, f"b{i}", [], 960, max_new=8, tenant="batchco")
    assert d.core.snapshot().retained_blocks == 4 * 60 * 2
    # a long running request pushes live usage past the evict watermark (85 % = 870 blocks)
    d.add(prompt_len=7000, max_new=8)
    d.run()
    evicted = [e for e in d.core.events if e.kind is EventKind.EVICTED]
    assert evicted and all(e.tenant == "batchco" for e in evicted[:2])


def test_session_ids_are_scoped_to_their_tenant(driver):
    turn(driver, "same", [], 50)
    r, _ = turn(driver, "same", [], 50, tenant="globex")
    assert driver.core.sessions.get("globex", "same").turns == 1 and not r.session_rebuilt


def test_tenant_over_its_cap_reclaims_only_the_overage_and_never_the_continuing_session():
    # cap: floor(0.185 × 1,024) = 189 blocks (a new session reserves ceil(968 × 1.1 / 16) = 67:
    # the third one fits, 120 + 67 = 187)
    d = Driver(small_config(1024, overrides={"tenants.acme.max_kv_share": 0.185}))
    _, keep_history = turn(d, "keep", [], 960, max_new=8)  # 60 blocks retained, the oldest session
    for i in range(2):
        turn(d, f"old{i}", [], 960, max_new=8)  # 60 more each: 180 retained in all
    # the next turn of "keep" reserves ceil((998 + 64) × 1.1 / 16) = 74 blocks: 180 − 60 + 74 = 194,
    # 5 over the cap. LRU would pick "keep" itself; it is spared, and one old session goes.
    r, _ = turn(d, "keep", keep_history, 30, max_new=64)
    assert not r.session_rebuilt and r.num_prefix_hit_tokens == 960
    evicted = [e for e in d.core.events if e.kind is EventKind.EVICTED]
    assert [(e.reason, e.request_id) for e in evicted] == [("tenant_quota", "old0")]


def test_a_tenant_refused_for_max_active_seqs_keeps_its_idle_sessions():
    # the same tenant over its share cap as above, but also at max_active_seqs: evicting an idle
    # session could not admit the turn, so none is evicted for it
    d = Driver(small_config(1024, overrides={"tenants.acme.max_kv_share": 0.185, "tenants.acme.max_active_seqs": 1}))
    _, keep_history = turn(d, "keep", [], 960, max_new=8)
    for i in range(2):
        turn(d, f"old{i}", [], 960, max_new=8)
    d.add(prompt_len=10, max_new=8)  # running: the tenant's one active sequence
    with pytest.raises(CapacityError, match="max_active_seqs"):
        d.add(prompt_token_ids=keep_history + [1, 2, 3], max_new=64, session_id="keep")
    assert not [e for e in d.core.events if e.kind is EventKind.EVICTED]
    assert d.core.snapshot().retained_blocks == 180
