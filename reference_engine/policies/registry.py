"""Policy factory: `make_policy(config, plan)` resolves `kv_cache.policy` to a `Policy`.

Every policy is registered here, once, by name; each module owns its factory.
"""

from __future__ import annotations

from collections.abc import Callable

from record.errors import UnknownNameError
from reference_engine.config import EngineConfig, PolicyName
from reference_engine.memory import MemoryPlan
from reference_engine.policies.baselines import make_none, make_vllm_like
from reference_engine.policies.h2o import make_h2o
from reference_engine.policies.lru import make_lru
from reference_engine.policies.multi_queue import make_multi_queue
from reference_engine.policies.policy import Policy
from reference_engine.policies.streamingllm import make_streamingllm
from reference_engine.policies.value_density import make_value_density
from reference_engine.policies.zones import make_zones

PolicyFactory = Callable[[EngineConfig, MemoryPlan], Policy]

POLICIES: dict[str, PolicyFactory] = {
    PolicyName.LRU.value: make_lru,
    PolicyName.MULTI_QUEUE.value: make_multi_queue,
    PolicyName.VALUE_DENSITY.value: make_value_density,
    PolicyName.ZONES.value: make_zones,
    PolicyName.STREAMINGLLM.value: make_streamingllm,
    PolicyName.H2O.value: make_h2o,
    PolicyName.NONE.value: make_none,
    PolicyName.VLLM_LIKE.value: make_vllm_like,
}


def make_policy(config: EngineConfig, plan: MemoryPlan) -> Policy:
    name = config.kv_cache.policy.value
    try:
        factory = POLICIES[name]
    except KeyError:
        raise UnknownNameError("policy", name, POLICIES) from None
    return factory(config, plan)
