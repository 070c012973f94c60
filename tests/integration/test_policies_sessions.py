"""Sessions under every policy: idle timeout, token cap, 410 vs rebuild, low-priority-first and
retention-pressure eviction, pinned prefixes. The policy orders victims within a tenant; none of
these rules may depend on which policy runs."""

import zlib

import pytest

from reference_engine import ConfigError, ContextExpiredError, EngineCore, EventKind, RequestError, VirtualClock
from reference_engine.config import PolicyName
from tests.helpers import Driver, small_config

ALL = [p.value for p in PolicyName]
RETAINING = [p for p in ALL if p != "none"]  # `none` has no prefix cache, so retains nothing
# Token-level policies must not compress these sequences: they would keep no session state.
EXACT = {"streamingllm.sliding_window_tokens": 16_384, "h2o.min_tokens_to_compress": 16_384}
WIDE_OPEN = {f"tenants.{t}.max_kv_share": 1.0 for t in ("acme", "globex", "batchco")}


def driver(policy: str, num_blocks: int = 1024, **overrides) -> Driver:
    return Driver(small_config(num_blocks, overrides={"kv_cache.policy": policy, **EXACT, **WIDE_OPEN, **overrides}))


def turn(d: Driver, session: str, history: list[int], new_words: int, tenant: str = "acme", max_new: int = 8, **kw):
    salt = zlib.crc32(f"{tenant}/{session}".encode()) * 10_000
    ids = history + [salt + len(history) + i for i in range(new_words)]
    r = d.add(tenant=tenant, prompt_token_ids=ids, max_new=max_new, session_id=session, **kw)
    d.run()
    return r, ids + r.output_token_ids


@pytest.mark.parametrize("policy", ALL)
def test_idle_timeout_then_410_when_not_rebuildable_and_a_flagged_rebuild_when_it_is(policy):
    d = driver(policy, **{"kv_cache.max_session_idle_seconds": 5})
    _, fixed = turn(d, "fixed", [], 100, session_rebuildable=False)
    _, loose = turn(d, "loose", [], 100)
    d.clock.advance(6)
    d.core.step()
    assert sorted(e.request_id for e in d.core.events if e.kind is EventKind.EXPIRED) == ["fixed", "loose"]
    assert d.core.snapshot().retained_blocks == 0
    with pytest.raises(ContextExpiredError):
        d.add(prompt_token_ids=fixed + [1], session_id="fixed", session_rebuildable=False)
    r, _ = turn(d, "loose", loose, 5)
    assert r.session_rebuilt


@pytest.mark.parametrize("policy", ALL)
def test_a_session_over_its_token_cap_is_released(policy):
    d = driver(policy, **{"kv_cache.max_tokens_per_session": 64})
    turn(d, "s", [], 100)
    assert d.core.sessions.get("acme", "s").end_reason == "session_cap"
    assert d.core.snapshot().retained_blocks == 0


@pytest.mark.parametrize("policy", RETAINING)
def test_under_pressure_the_lowest_class_loses_its_sessions_first_and_a_fixed_one_answers_410(policy):
    d = driver(policy)
    for i in range(4):
        turn(d, f"a{i}", [], 960)
    batch = [turn(d, f"b{i}", [], 960, tenant="batchco", session_rebuildable=False)[1] for i in range(4)]
    assert d.core.snapshot().retained_blocks == 8 * 60
    # live usage past the evict watermark (870 of 1,024 blocks), and past the pool for vllm_like
    d.add(prompt_len=9500, max_new=8)
    d.run()
    evicted = [e for e in d.core.events if e.kind is EventKind.EVICTED]
    assert evicted and all(e.mode == policy for e in evicted)
    assert {e.tenant for e in evicted} == {"batchco"}  # the interactive sessions all survive
    gone = next(i for i in range(4) if d.core.sessions.get("batchco", f"b{i}").state.value == "evicted")
    with pytest.raises(ContextExpiredError):
        d.add(tenant="batchco", prompt_token_ids=batch[gone] + [1], session_id=f"b{gone}", session_rebuildable=False)


@pytest.mark.parametrize("policy", RETAINING)
def test_a_tenant_with_much_cache_and_little_traffic_loses_retention_first(policy):
    d = driver(policy)
    for i in range(5):
        turn(d, f"idle{i}", [], 960, tenant="globex")  # globex: much cache, then silence
    d.clock.advance(60)
    history: list[int] = []
    for _ in range(6):  # acme: one session, busy
        _, history = turn(d, "busy", history, 20)
    d.add(prompt_len=12_000, max_new=8)  # 750 blocks on top of 310 retained: past the watermark and the pool
    d.run()
    evicted = [e.tenant for e in d.core.events if e.kind is EventKind.EVICTED]
    assert evicted and evicted[0] == "globex"
    assert d.core.sessions.get("acme", "busy").is_retained


PINNED = "pinned words " * 60


@pytest.mark.parametrize("policy", ALL)
def test_pinned_prefixes_survive_pressure_and_their_cap_is_hard(policy):
    prefix = {
        "prefix_cache.public_prefixes": [{"name": "sys", "text": PINNED, "pinned": True}],
        "engine.max_num_batched_tokens": 64,
        "engine.max_num_seqs": 4,
        "kv_cache.guard": {
            "warn_at_percent": 50,
            "admission_at_percent": 60,
            "evict_at_percent": 70,
            "pause_batch_prefill_at_percent": 80,
            "preempt_at_percent": 90,
            "reject_at_percent": 99,
        },
    }
    d = driver(policy, 256, **prefix)
    d.core.pin_prefixes()
    pinned = d.core.snapshot().pinned_blocks
    assert pinned > 0
    for _ in range(6):
        try:
            d.add(prompt_len=900, max_new=100)
        except RequestError:  # refused under pressure: fine, this test is about the pins
            pass
    d.run()
    assert d.core.snapshot().live_blocks == d.core.snapshot().pinned_blocks == pinned
    capped = small_config(256, overrides={"kv_cache.policy": policy, "kv_cache.pinned_max_percent": 2, **prefix})
    with pytest.raises(ConfigError, match="pinned_max_percent"):
        EngineCore(capped, clock=VirtualClock()).pin_prefixes()
