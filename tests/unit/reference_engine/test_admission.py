"""Admission arithmetic, written out: the numbers in these tests are derived in the comments."""

import math

import pytest

from reference_engine import ContextLengthError, EngineConfig, EngineCore, VirtualClock, with_overrides
from reference_engine.config import TrafficClass
from reference_engine.core.admission import AdmissionAction
from reference_engine.request import Request

PROMPT_32K = 32_768


def default_core(model: str = "llama-3.1-8b") -> EngineCore:
    cfg = with_overrides(
        EngineConfig(),
        {
            "model.name": model,
            "tenants": {"acme": {"api_keys": ["k1"]}, "bulk": {"api_keys": ["k2"], "traffic_class": "batch"}},
        },
    )
    return EngineCore(cfg, clock=VirtualClock())


def request(core: EngineCore, prompt: int, max_new: int, cls=TrafficClass.INTERACTIVE) -> Request:
    return Request(
        request_id="r",
        tenant="acme",
        traffic_class=cls,
        num_prompt_tokens=prompt,
        max_new_tokens=max_new,
        arrival_s=0.0,
    )


def test_pool_arithmetic_of_the_default_profile():
    core = default_core()
    # H100-SXM: 81,559 MiB × 0.90 − 8.03e9 × 2 B of weights − 4 GiB workspace = 52.73 GiB
    pool = 81_559 * 2**20 * 0.90 - 8.03e9 * 2 - 4 * 2**30
    # Llama-3.1-8B bf16: 2 × 32 layers × 8 KV heads × 128 dims × 2 B = 131,072 B per token; 16-token blocks
    assert core.memory.bytes_per_token == 131_072
    assert core.memory.num_blocks == math.floor(pool / (131_072 * 16)) == 26_995


def test_32k_prompt_on_llama3_8b_is_a_context_length_error():
    core = default_core("llama-3-8b")  # max_position_embeddings 8192
    with pytest.raises(ContextLengthError) as err:
        core.add_request(tenant="acme", num_prompt_tokens=PROMPT_32K, max_new_tokens=1024)
    assert err.value.status == 400 and "8192" in err.value.message


def test_32k_prompt_on_llama31_8b_is_admitted_on_an_empty_pool():
    core = default_core()
    r = core.add_request(tenant="acme", num_prompt_tokens=PROMPT_32K, max_new_tokens=1024)
    # worst case: ceil((32,768 + 1,024) × 1.1 safety / 16) = ceil(2,323.2) = 2,324 blocks
    assert r.estimated_blocks == 2_324
    assert list(core.events)[-1].kind.value == "admitted"


def test_32k_prompt_is_queued_or_rejected_exactly_at_the_watermarks():
    core = default_core()
    adm, n = core.admission, core.memory.num_blocks
    r = request(core, PROMPT_32K, 1024)
    need = adm.estimate_blocks(r)
    assert need == 2_324
    # long interactive request (≥ 4,096 tokens): limit = admission watermark floor(0.82 × 26,995) = 22,135
    assert adm.class_limit(r) == math.floor(0.82 * n) == 22_135
    assert (
        adm.decide(r, need, projected_live_blocks=22_135 - 2_324, live_blocks=0, queue_len=0).action
        is AdmissionAction.ADMIT
    )
    assert (
        adm.decide(r, need, projected_live_blocks=22_135 - 2_323, live_blocks=0, queue_len=0).action
        is AdmissionAction.QUEUE
    )
    # above the reject watermark floor(0.95 × 26,995) = 25,645 live blocks: 429 kv_capacity
    d = adm.decide(r, need, projected_live_blocks=25_645, live_blocks=25_645, queue_len=0)
    assert (d.action, d.reason) == (AdmissionAction.REJECT, "kv_capacity")
    # a full queue rejects instead of queueing without bound
    d = adm.decide(r, need, projected_live_blocks=22_000, live_blocks=22_000, queue_len=512)
    assert (d.action, d.reason) == (AdmissionAction.REJECT, "kv_capacity")


def test_batch_never_takes_the_interactive_reserve():
    core = default_core()
    r = request(core, 1000, 100, TrafficClass.BATCH)
    # batch limit: (1 − 0.25) × 26,995 = 20,246 blocks
    assert core.admission.class_limit(r) == 20_246


def test_request_larger_than_its_class_may_ever_hold_is_rejected():
    cfg = with_overrides(
        EngineConfig(), {"hardware.kv_pool_gib": 2.0, "engine.max_num_seqs": 8, "engine.max_num_batched_tokens": 256}
    )
    core = EngineCore(cfg, clock=VirtualClock())
    # 1,024 blocks; a long request may use the admission watermark: floor(0.82 × 1,024) = 839 blocks
    r = request(core, 12_000, 1000)  # ceil(13,000 × 1.1 / 16) = 894 blocks > 839
    d = core.admission.decide(r, core.admission.estimate_blocks(r), 0, 0, 0)
    assert (d.action, d.reason) == (AdmissionAction.REJECT, "kv_capacity") and "at most 839" in d.message


def test_missing_max_tokens_means_the_conservative_default():
    core = default_core()
    r = core.add_request(tenant="acme", num_prompt_tokens=100)
    assert r.max_new_tokens == 1024 and r.requested_max_new_tokens is None


@pytest.mark.parametrize("policy", ["lru", "vllm_like"])
def test_a_request_larger_than_the_whole_pool_is_refused_under_every_policy_that_preempts(policy):
    # 64 blocks of 16 tokens = 1,024 tokens of KV: 1,000 + 100 can never fit, admission or not
    # (a policy without admission would start it, preempt it when the pool fills, and it would
    # wait forever). `none` lets it fail as an OOM (tests/unit/server/test_errors.py).
    cfg = with_overrides(
        EngineConfig(),
        {
            "hardware.kv_pool_gib": 64 * 16 * 131_072 / 2**30,
            "kv_cache.policy": policy,
            "engine.max_num_seqs": 1,
            "engine.max_num_batched_tokens": 16,
            "kv_cache.guard.warn_at_percent": 40,
            "kv_cache.guard.admission_at_percent": 50,
            "kv_cache.guard.evict_at_percent": 60,
            "kv_cache.guard.pause_batch_prefill_at_percent": 70,
            "kv_cache.guard.preempt_at_percent": 80,
            "kv_cache.guard.reject_at_percent": 90,
            "tenants": {"acme": {"api_keys": ["k1"], "max_kv_share": 1.0}},
        },
    )
    core = EngineCore(cfg, clock=VirtualClock())
    with pytest.raises(ContextLengthError) as err:
        core.add_request(tenant="acme", num_prompt_tokens=1_000, max_new_tokens=100)
    assert err.value.status == 400 and "1024 tokens" in err.value.message
    core.add_request(tenant="acme", num_prompt_tokens=100, max_new_tokens=10)  # a request that fits is served
