"""The baselines against the rest: the same overload OOMs `none` only; `vllm_like` preempts the newest."""

import pytest

from reference_engine import EventKind, FinishReason, RequestError
from reference_engine.config import PolicyName
from tests.helpers import Driver, small_config

ALL = [p.value for p in PolicyName]
# Rungs far enough apart for a 256-block pool whose steps grow by up to 16 blocks.
SPREAD_GUARD = {
    "warn_at_percent": 50,
    "admission_at_percent": 60,
    "evict_at_percent": 70,
    "pause_batch_prefill_at_percent": 80,
    "preempt_at_percent": 90,
    "reject_at_percent": 99,
}


def overload(policy: str) -> Driver:
    """Ten 600-token requests (38 blocks each) at once into 256 blocks, 8 running at a time."""
    d = Driver(
        small_config(
            256,
            overrides={
                "kv_cache.policy": policy,
                "kv_cache.guard": SPREAD_GUARD,
                "engine.max_num_seqs": 8,
                "engine.max_num_batched_tokens": 128,
                "tenants.acme.max_kv_share": 1.0,
            },
        )
    )
    for _ in range(10):
        try:
            d.add(prompt_len=300, max_new=300)
        except RequestError:
            pass  # refused at the door (429): an explicit answer, not an OOM
    d.run()
    return d


@pytest.mark.parametrize("policy", ALL)
def test_the_same_overload_ooms_none_and_nothing_else(policy):
    d = overload(policy)
    ooms = [e for e in d.core.events if e.kind is EventKind.OOM]
    finished = [e for e in d.core.events if e.kind is EventKind.FINISHED]
    if policy == "none":
        assert ooms and d.core.policy_stats().num_oom == len(ooms)
        # a bare generate loop: the OOM fails the whole running batch
        assert sum(e.reason == "oom" for e in finished) > 1
    else:
        assert not ooms and all(e.reason in ("length", "rejected") for e in finished)
    assert d.core.pool.num_live == 0
    d.core.pool.check_invariants()


def test_vllm_like_preempts_the_most_recently_admitted_request():
    d = Driver(small_config(64, overrides={"kv_cache.policy": "vllm_like", "engine.max_num_batched_tokens": 1024}))
    a = d.add(prompt_len=300, max_new=200)
    b = d.add(prompt_len=300, max_new=200)
    c = d.add(prompt_len=300, max_new=200)
    d.step()  # all three start (FCFS, no admission control): 57 of 64 blocks
    assert all(r.num_computed_tokens == 300 for r in (a, b, c))
    d.run()
    preempted = [e for e in d.core.events if e.kind is EventKind.PREEMPTED]
    assert preempted[0].request_id == c.request_id and preempted[0].mode == "recompute"
    assert all(r.finish_reason is FinishReason.LENGTH for r in (a, b, c))


def test_the_other_policies_preempt_by_score_instead():
    d = Driver(
        small_config(
            256,
            overrides={
                "kv_cache.policy": "lru",
                "kv_cache.guard": SPREAD_GUARD,
                "admission.enabled": False,
                "engine.max_num_seqs": 4,
                "engine.max_num_batched_tokens": 64,
                "tenants.batchco.max_kv_share": 1.0,
                "tenants.acme.max_kv_share": 1.0,
            },
        )
    )
    low = d.add(tenant="batchco", prompt_len=800, max_new=400)
    for _ in range(3):
        d.add(prompt_len=800, max_new=400)
    d.run()
    preempted = [e for e in d.core.events if e.kind is EventKind.PREEMPTED]
    assert preempted and preempted[0].request_id == low.request_id  # the batch request, though admitted first
