"""A policy = an eviction-index class for the two reusable tiers + the behaviour around it.

Most policies differ only in their index (`lru`, `multi_queue`, `value_density`). The
token-level ones add a `Compressor` that drops KV inside long running sequences (marked
approximate). The baselines switch engine behaviour off: `none` has no admission, eviction or
preemption (an allocation that does not fit fails the whole running batch), `vllm_like` is FCFS
with LRU prefix blocks, no tenant caps and recompute of the most recently admitted request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from reference_engine.config import PreemptionMode
from reference_engine.policies.base import EvictionIndex, Tier


class VictimOrder(str, Enum):
    SCORE = "score"  # priority, waiting, blocks held, recompute cost, aging (seed 004)
    NEWEST = "newest"  # the most recently admitted request (vLLM)


class Compressor(Protocol):
    """Token-level eviction inside a running sequence (streamingllm, h2o)."""

    def plan_drop(self, num_kv_tokens: int, block_tokens: int) -> tuple[int, int]:
        """(blocks kept at the head, blocks to drop right after them); (0, 0) to keep all."""
        ...


@dataclass(frozen=True)
class Policy:
    name: str
    make_index: Callable[[Tier], EvictionIndex]
    admission: bool = True
    tenant_caps: bool = True
    watermarks: bool = True  # evict / pause / preempt rungs of the ladder
    preemption: bool = True
    preemption_mode: PreemptionMode | None = None  # None: as the config says
    prefix_cache: bool = True
    victim_order: VictimOrder = VictimOrder.SCORE
    fcfs: bool = False  # ignore traffic class when ordering the waiting queue
    oom_fails_batch: bool = False
    session_tick_s: float = 0.0  # 0: evict retained state on every step
    max_session_evict_blocks_per_tick: int | None = None  # None: down to the evict watermark at once
    compressor: Compressor | None = None
    touch_on_decode: bool = True

    @property
    def approximate(self) -> bool:
        return self.compressor is not None
