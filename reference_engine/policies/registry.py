"""Policy factory: `make_policy(config, num_blocks)` resolves `kv_cache.policy` to a `Policy`."""

from __future__ import annotations

from collections.abc import Callable

from reference_engine.config import EngineConfig, PolicyName, PreemptionMode
from reference_engine.errors import UnknownNameError
from reference_engine.policies.base import LruIndex
from reference_engine.policies.policy import Policy, VictimOrder

PolicyFactory = Callable[[EngineConfig, int], Policy]


def _lru(config: EngineConfig, num_blocks: int) -> Policy:
    return Policy("lru", lambda tier: LruIndex(), touch_on_decode=config.lru.touch_on_decode)


def _none(config: EngineConfig, num_blocks: int) -> Policy:
    return Policy("none", lambda tier: LruIndex(), admission=False, tenant_caps=False, watermarks=False,
                  preemption=False, prefix_cache=False, fcfs=True, oom_fails_batch=True)


def _vllm_like(config: EngineConfig, num_blocks: int) -> Policy:
    return Policy("vllm_like", lambda tier: LruIndex(), admission=False, tenant_caps=False, watermarks=False,
                  victim_order=VictimOrder.NEWEST, fcfs=True, preemption_mode=PreemptionMode.RECOMPUTE)


POLICIES: dict[str, PolicyFactory] = {
    PolicyName.LRU.value: _lru,
    PolicyName.NONE.value: _none,
    PolicyName.VLLM_LIKE.value: _vllm_like,
}


def make_policy(config: EngineConfig, num_blocks: int) -> Policy:
    name = config.kv_cache.policy.value
    try:
        factory = POLICIES[name]
    except KeyError:
        raise UnknownNameError("policy", name, POLICIES) from None
    return factory(config, num_blocks)
