"""The baselines every policy is compared against, so each shows what it adds over an engine
with no KV management at all and over vLLM's own.

- `none`: what a bare `generate` loop does. No admission, no tenant caps, no watermark ladder,
  no prefix cache (so no retained sessions either: there is nothing to evict), no preemption.
  An allocation that does not fit is an OOM that fails the whole running batch.
- `vllm_like`: vLLM v1's scheduler. FCFS (traffic class ignored), LRU over refcount-0 prefix
  blocks, no admission control, no tenant caps, no watermark ladder; when a running request
  cannot grow, idle state is reclaimed first, then the most recently admitted request is
  preempted and recomputed.
"""

from __future__ import annotations

from reference_engine.config import EngineConfig, PreemptionMode
from reference_engine.memory import MemoryPlan
from reference_engine.policies.lru_queue import make_lru_index
from reference_engine.policies.policy import Policy, VictimOrder


def make_none(config: EngineConfig, plan: MemoryPlan) -> Policy:
    return Policy(
        "none",
        make_lru_index,
        admission=False,
        tenant_caps=False,
        watermarks=False,
        preemption=False,
        prefix_cache=False,
        fcfs=True,
        oom_fails_batch=True,
    )


def make_vllm_like(config: EngineConfig, plan: MemoryPlan) -> Policy:
    return Policy(
        "vllm_like",
        make_lru_index,
        admission=False,
        tenant_caps=False,
        watermarks=False,
        victim_order=VictimOrder.NEWEST,
        fcfs=True,
        preemption_mode=PreemptionMode.RECOMPUTE,
    )
