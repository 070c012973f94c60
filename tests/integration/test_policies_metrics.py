"""The numbers that compare policies come out of the core for every policy, and agree with the
event log: evictions by reason, prefix hit rate, re-prefill tokens, approximate tokens dropped."""

import zlib
from collections import Counter

import pytest

from reference_engine import EventKind, RequestError
from reference_engine.config import PolicyName
from tests.helpers import Driver, small_config

ALL = [p.value for p in PolicyName]
SPREAD_GUARD = {
    "warn_at_percent": 50,
    "admission_at_percent": 60,
    "evict_at_percent": 70,
    "pause_batch_prefill_at_percent": 80,
    "preempt_at_percent": 90,
    "reject_at_percent": 99,
}


def mixed_run(policy: str) -> Driver:
    d = Driver(
        small_config(
            256,
            overrides={
                "kv_cache.policy": policy,
                "kv_cache.guard": SPREAD_GUARD,
                "engine.max_num_seqs": 4,
                "engine.max_num_batched_tokens": 64,
                "kv_cache.max_session_idle_seconds": 30,
                "zones.sliding_window_tokens": 2048,  # zones' window rule rolls the long prompt too
                **{f"tenants.{t}.max_kv_share": 1.0 for t in ("acme", "globex", "batchco")},
            },
        )
    )
    for name in ("a", "b", "c"):  # two turns each: the second hits what the first retained
        salt = zlib.crc32(name.encode()) * 10_000
        first = d.add(prompt_token_ids=[salt + i for i in range(300)], max_new=8, session_id=name)
        d.run()
        d.add(
            prompt_token_ids=first.prompt_token_ids + first.output_token_ids + [salt + 999], max_new=8, session_id=name
        )
        d.run()
    d.add(tenant="globex", prompt_len=2500, max_new=40)  # long enough for the token-level policies to drop KV
    for i in range(6):
        try:
            d.add(tenant="batchco" if i % 2 else "acme", prompt_len=700, max_new=120)
        except RequestError:
            pass
    d.run()
    d.clock.advance(60)
    d.core.step()  # what is left idle expires
    return d


@pytest.mark.parametrize("policy", ALL)
def test_policy_stats_agree_with_the_event_log(policy):
    d = mixed_run(policy)
    stats, events = d.core.policy_stats(), list(d.core.events)
    assert stats.policy == policy and stats.approximate == (policy in ("streamingllm", "h2o", "zones"))
    evicted = [e for e in events if e.kind is EventKind.EVICTED]
    assert stats.evicted_sessions == Counter(e.reason for e in evicted)
    assert sum(stats.evicted_session_blocks.values()) == sum(e.num_blocks for e in evicted)
    assert all(e.mode == policy for e in evicted)
    assert stats.expired_sessions == sum(e.kind is EventKind.EXPIRED for e in events)
    approximated = [e for e in events if e.kind is EventKind.APPROXIMATED]
    assert stats.approximated_tokens == sum(e.num_tokens for e in approximated)
    assert (stats.approximated_tokens > 0) == stats.approximate
    assert stats.num_oom == sum(e.kind is EventKind.OOM for e in events)
    assert 0.0 <= stats.prefix_hit_rate <= 1.0
    assert (stats.prefix_hit_blocks > 0) == (policy != "none")  # `none` runs without a prefix cache
    recomputed = [e for e in events if e.kind is EventKind.PREEMPTED and e.mode == "recompute"]
    assert (stats.recompute_tokens > 0) == bool(recomputed)
    d.core.pool.check_invariants()
