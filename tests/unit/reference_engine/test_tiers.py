"""KV tiers below the GPU pool: the tier store (LRU, tenant caps, checksums), demotion on
eviction (bounded write-back, host to disk), promotion by prefix hit (the request waits without
holding the step), and the fallbacks to recompute (slower than re-prefill, failed load)."""

import pytest

from record.errors import InvalidRequestError
from reference_engine import with_overrides
from reference_engine.core.tier_store import TierStore
from reference_engine.core.tiers import WriteChannel
from reference_engine.executors.base import Tier
from reference_engine.request import RequestState
from tests.helpers import TENANTS, Driver, distinct_prompts, serve_rounds, small_config, tiered_driver


# ------------------------------------------------------------------ the store
def test_store_evicts_lru_and_touch_refreshes():
    s = TierStore("host", 3, {})
    for k in (1, 2, 3):
        assert s.put_many([(k, "a")]) == []
    assert s.touch(1) and not s.touch(9)
    assert s.put_many([(4, "a")]) == [(2, "a")]  # 1 was touched: 2 is the oldest
    assert 1 in s and 2 not in s and len(s) == 3
    s.check_invariants()


def test_store_tenant_cap_evicts_the_tenants_own_oldest():
    s = TierStore("host", 10, {"a": 2, "b": 5})
    s.put_many([(1, "a")])
    s.put_many([(2, "b")])
    s.put_many([(3, "a")])
    assert s.put_many([(4, "a")]) == [(1, "a")]  # a is at its cap: its own oldest goes, not b's
    assert s.tenant_blocks("a") == 2 and s.tenant_blocks("b") == 1
    s.put_many([(5, None)])  # public blocks are uncapped
    s.check_invariants()


def test_store_drop_and_verify():
    s = TierStore("disk", 4, {})
    s.put_many([(7, "a")])
    assert s.verify(7) and not s.verify(8)
    assert s.drop([7, 8]) == [7] and len(s) == 0 and s.num_dropped == 1
    s.put_many([(1, "a")])
    assert s.drop_all() == [1]


def test_write_channel_bounds_the_backlog():
    ch = WriteChannel(bytes_per_s=1e6, max_backlog_s=0.01, block_bytes=1e3)  # 1 ms a block
    assert ch.admit(100, 0.0) == 11  # writes starting at 0, 1, ..., 10 ms
    assert ch.admit(5, 0.0) == 0  # backlog full
    assert ch.admit(5, 0.0015) == 1  # one write done: one more may queue
    assert ch.admit(5, 1.0) == 5  # drained


# ----------------------------------------------------------------- the engine
def _check_clean(d: Driver) -> None:
    core = d.core
    core.pool.check_invariants()
    assert core.pool.num_live == 0 and not core.scheduler.loads
    for store in core.tiers.stores.values():
        store.check_invariants()


def _loads(d: Driver, reason: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in d.core.events.since(0).events:
        if e.kind.value == "tier_load" and e.reason == reason:
            out[e.mode] = out.get(e.mode, 0) + e.num_blocks
    return out


def test_without_tiers_a_cyclic_reuse_never_hits():
    d = Driver(small_config(1024, tenants={**TENANTS, "acme": {**TENANTS["acme"], "max_kv_share": 1.0}}))
    assert d.core.tiers is None
    reqs = serve_rounds(d, distinct_prompts(12))
    assert sum(r.num_prefix_hit_tokens for r in reqs) == 0 and d.core.pool.num_evicted_cached > 0


def test_evicted_blocks_are_demoted_and_promoted_back():
    d = tiered_driver(host_gib=4.0)
    reqs = serve_rounds(d, distinct_prompts(12))
    host = d.core.tiers.counters[Tier.HOST]
    # every eviction written back, or found there already (a promoted block keeps its copy)
    assert host.demoted + host.touched == d.core.pool.num_evicted_cached and host.touched > 0
    loaded = _loads(d, "ok")
    assert loaded["host"] == host.promoted > 0 and host.failed == 0
    assert all(r.state is RequestState.FINISHED for r in reqs)
    # the second round found each prompt below the GPU: 93 of its 94 blocks (one token is computed)
    assert host.promoted == 12 * 93
    # loaded tokens are cached tokens for the client (usage.prompt_tokens_details.cached_tokens)
    assert [r.num_prefix_hit_tokens for r in reqs[12:]] == [93 * 16] * 12
    _check_clean(d)


def test_a_request_waits_for_its_load_without_holding_the_step():
    d = tiered_driver(host_gib=4.0)
    prompts = distinct_prompts(12)
    serve_rounds(d, prompts, rounds=1)
    core = d.core
    runner = core.add_request(tenant="acme", prompt_token_ids=list(range(100, 120)), max_new_tokens=64)
    d.step()  # the runner's prompt: it decodes from now on
    loader = core.add_request(tenant="acme", prompt_token_ids=[*prompts[0], 9], max_new_tokens=4)
    out = d.step()
    assert loader.request_id in core.scheduler.loads and loader.state is RequestState.RUNNING
    assert [o.request.request_id for o in out.outputs] in ([], [runner.request_id])  # runner ran, loader did not
    ready = core.scheduler.loads[loader.request_id].ready_s
    assert core.next_timer_s() is not None and core.next_timer_s() <= ready
    d.run()
    assert loader.state is RequestState.FINISHED and runner.state is RequestState.FINISHED
    assert loader.first_token_s >= ready
    _check_clean(d)


def test_host_evictions_demote_to_disk_and_disk_hits_load():
    d = tiered_driver(host_gib=0.1, disk_gib=4.0, disk_read_gbps=25.0)  # a striped NVMe: loads beat re-prefill
    serve_rounds(d, distinct_prompts(12))
    host, disk = d.core.tiers.counters[Tier.HOST], d.core.tiers.counters[Tier.DISK]
    assert disk.demoted > 0 and disk.promoted > 0
    assert d.core.tiers.used_blocks(Tier.HOST) <= d.core.tiers.capacity_blocks(Tier.HOST)
    # a batch of evictions larger than the host is partly lost on the way (counted)
    assert host.demoted + host.touched + host.write_dropped == d.core.pool.num_evicted_cached
    _check_clean(d)


def test_write_back_beyond_its_bandwidth_is_dropped_and_counted():
    d = tiered_driver(host_gib=4.0, host_write_gbps=0.01, max_write_backlog_ms=0)
    serve_rounds(d, distinct_prompts(12))
    host = d.core.tiers.counters[Tier.HOST]
    assert host.write_dropped > 0
    assert host.demoted + host.touched + host.write_dropped == d.core.pool.num_evicted_cached


def test_a_load_slower_than_prefill_recomputes():
    d = tiered_driver(host_gib=4.0, disk_gib=0.0)
    d.core.tiers._reads[Tier.HOST].bytes_per_s = 1e6  # a crawling link: re-prefill wins
    reqs = serve_rounds(d, distinct_prompts(12))
    host = d.core.tiers.counters[Tier.HOST]
    assert host.promoted == 0 and host.slower == 12 * 93
    assert "host" in _loads(d, "slower_than_prefill")
    assert all(r.state is RequestState.FINISHED for r in reqs)
    _check_clean(d)


@pytest.mark.parametrize("rate", [1.0, 0.5])
def test_a_failed_load_falls_back_to_recompute_and_forgets_the_blocks(rate):
    d = tiered_driver(host_gib=4.0, load_failure_rate=rate)
    reqs = serve_rounds(d, distinct_prompts(12))
    host = d.core.tiers.counters[Tier.HOST]
    assert host.failed > 0 and (host.promoted == 0) == (rate == 1.0)
    assert all(r.state is RequestState.FINISHED and r.num_output_tokens == 4 for r in reqs)
    _check_clean(d)


def test_failures_are_deterministic():
    runs = []
    for _ in range(2):
        d = tiered_driver(host_gib=4.0, load_failure_rate=0.5, failure_seed=3)
        serve_rounds(d, distinct_prompts(12))
        runs.append((d.core.tiers.counters[Tier.HOST], _loads(d, "failed")))
    assert runs[0] == runs[1]


def test_scoping_holds_below_the_gpu():
    """Another tenant's identical prompt never loads acme's demoted blocks."""
    d = tiered_driver(host_gib=4.0)
    prompts = distinct_prompts(12)
    serve_rounds(d, prompts, rounds=1)
    r = d.core.add_request(tenant="globex", prompt_token_ids=[*prompts[0], 5], max_new_tokens=4)
    d.run()
    assert r.num_prefix_hit_tokens == 0 and not _loads(d, "ok")


def test_tiers_need_the_prefix_cache():
    config = with_overrides(small_config(1024), {"tiers.host_gib": 1.0, "prefix_cache.enabled": False})
    assert Driver(config).core.tiers is None


def test_store_evict_all_empties_it_and_counts_evictions():
    s = TierStore("host", 4, {})
    s.put_many([(1, "a"), (2, None)])
    assert s.evict_all() == [(1, "a"), (2, None)] and len(s) == 0
    assert s.num_evicted == 2 and s.num_leaked == 0
    s.check_invariants()


@pytest.mark.parametrize("tier", [Tier.HOST, Tier.DISK])
def test_offload_pushes_cached_blocks_down_and_a_repeat_loads_them(tier):
    d = tiered_driver(host_gib=4.0, disk_gib=4.0)
    prompt = distinct_prompts(1)[0]
    first = d.core.add_request(tenant="acme", prompt_token_ids=prompt, max_new_tokens=4)
    d.run()
    moved = d.core.offload_prefix_cache(tier)
    cached = len(first.block_hashes)
    assert moved["gpu_blocks_offloaded"] == cached and d.core.pool.num_cached == 0
    assert moved["host_blocks_offloaded"] == (cached if tier is Tier.DISK else 0)
    assert d.core.tiers.used_blocks(tier) == cached
    again = d.core.add_request(tenant="acme", prompt_token_ids=prompt, max_new_tokens=4)
    d.run()
    assert again.num_prefix_hit_tokens == (len(prompt) - 1) // 16 * 16 and set(_loads(d, "ok")) == {tier.value}
    _check_clean(d)


def test_offload_to_a_tier_the_engine_lacks_says_how_to_get_one():
    with pytest.raises(InvalidRequestError, match="disk_gib"):
        tiered_driver(host_gib=4.0).core.offload_prefix_cache(Tier.DISK)
    with pytest.raises(InvalidRequestError, match="host_gib or disk_gib"):
        Driver(small_config(1024)).core.offload_prefix_cache(Tier.HOST)


# who hits a prompt acme (salt s1) sent, once it was offloaded to the tier: (another tenant, another salt)
KEY_SCOPES = {"request": (False, False), "no_salt": (False, True), "no_tenant": (True, False)}


@pytest.mark.parametrize("key_scope", KEY_SCOPES)
@pytest.mark.parametrize("tier", [Tier.HOST, Tier.DISK])
def test_a_tier_key_that_drops_the_tenant_or_the_salt_serves_another_party_below_the_gpu(key_scope, tier):
    """Below the GPU only the request's own key isolates (in the GPU pool every key scope does:
    the GPU probes pass on the broken configs, tests/e2e/test_gate_truth.py)."""
    hits = {}
    for other, (tenant, salt) in {"tenant": ("globex", None), "salt": ("acme", "s2")}.items():
        d = tiered_driver(host_gib=4.0, disk_gib=4.0, key_scope=key_scope)
        prompt = distinct_prompts(1)[0]
        own = "s1" if other == "salt" else None
        d.core.add_request(tenant="acme", prompt_token_ids=prompt, max_new_tokens=4, cache_salt=own)
        d.run()
        d.core.offload_prefix_cache(tier)
        below = d.core.add_request(tenant=tenant, prompt_token_ids=prompt, max_new_tokens=4, cache_salt=salt)
        d.run()
        hits[other] = below.num_prefix_hit_tokens > 0
        _check_clean(d)
    assert (hits["tenant"], hits["salt"]) == KEY_SCOPES[key_scope]
