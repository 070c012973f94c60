"""A policy = an eviction-index class for the two reusable tiers + the behaviour around it.

Most policies differ only in their index (`lru`, `multi_queue`, `value_density`). The
token-level ones add a `Compressor` that drops KV inside long running sequences (marked
approximate). The baselines switch engine behaviour off: `none` has no admission, eviction or
preemption (an allocation that does not fit fails the whole running batch), `vllm_like` is FCFS
with LRU prefix blocks, no tenant caps and recompute of the most recently admitted request.

What every policy shares, and no policy may change: the watermark ladder, tenant quotas,
sessions (idle timeout, token cap, `context_expired`), pinned prefixes, and starvation
protection (aging, the batch minimum share, the cap on consecutive preemptions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

import numpy as np

from reference_engine.config import PreemptionMode
from reference_engine.policies.base import EvictionIndex, IndexKind

if TYPE_CHECKING:
    from reference_engine.executors.base import Attention
    from reference_engine.request import Request


class VictimOrder(str, Enum):
    SCORE = "score"  # priority, waiting, blocks held, recompute cost, aging (core/preemption.py)
    NEWEST = "newest"  # the most recently admitted request (vLLM)


class Compressor(Protocol):
    """Token-level eviction inside a running sequence (streamingllm, h2o).

    After every step a request ran in, the engine asks which of its KV tokens to keep. It
    applies every plan it gets: the kept tokens are compacted to the front of the request's
    blocks and the blocks left over are freed (`KVCacheManager.compact`), and the request is
    marked approximate. A compressor that keeps per-request state is told when to drop it.
    """

    def plan_keep(
        self, r: Request, attention: Attention | None, protected_tokens: Callable[[], int], num_steps: int = 1
    ) -> np.ndarray | None:
        """Sorted KV indices of `r` to keep, or None to keep everything, after `r` ran
        `num_steps` steps of the same chunk (its counters as after them; more than one only
        where `compaction_rule` said none of the steps before the last compacts).

        `attention`: the mass each of `r`'s KV tokens received in each of these steps (None if
        the executor supplies none). `protected_tokens()` (call it only when about to compact)
        is a KV prefix shared with other requests or sessions: a plan must keep all of it."""
        ...

    def forget(self, request_id: str) -> None:
        """The request ended, or its KV was dropped for recompute: forget what was learnt."""
        ...

    def compaction_rule(self, r: Request, protected_tokens: int) -> CompactionRule | None:
        """When `plan_keep` will compact `r` (with `protected_tokens` shared) over its coming
        steps, as a function of lengths: how many steps a plan may hold for `r` (the scheduler
        ends it at the step that compacts). None when that needs more than lengths and what
        the compressor has learnt (attention not yet seen): then `r`'s plans hold for one step."""
        ...


class CompactionRule(Protocol):
    def next_compaction(self, kv_tokens: int, computed_tokens: int, chunk: int, within: int) -> tuple[int, int] | None:
        """For a request holding `kv_tokens` KV tokens of `computed_tokens` computed, computing
        `chunk` more per step: the first step (1 .. `within`) at whose end `plan_keep` compacts
        it, and the KV tokens it keeps then; None if none of them does."""
        ...


@dataclass(frozen=True)
class Policy:
    name: str
    make_index: Callable[[IndexKind], EvictionIndex]
    admission: bool = True
    tenant_caps: bool = True
    watermarks: bool = True  # evict / pause / preempt rungs of the ladder
    preemption: bool = True
    preemption_mode: PreemptionMode | None = None  # None: as the config says
    prefix_cache: bool = True
    victim_order: VictimOrder = VictimOrder.SCORE
    fcfs: bool = False  # ignore traffic class when ordering the waiting queue
    oom_fails_batch: bool = False
    # The evict rung's pace: idle sessions are evicted on a tick every `session_tick_s` (0: every
    # step), at most `max_session_evict_blocks_per_tick` blocks per tick (strictly; one session
    # larger than the whole budget may go alone); None: down to just below the watermark at once.
    session_tick_s: float = 0.0
    max_session_evict_blocks_per_tick: int | None = None
    compressor: Compressor | None = None
    # Free blocks kept ahead of demand: at a step's start, cached prefix blocks are evicted (in
    # the blocks index's order) until this many are free or none is cached (zones' buffer).
    free_buffer_blocks: int = 0
    touch_on_decode: bool = True  # False: an entry's recency is its request's last scheduling

    @property
    def approximate(self) -> bool:
        return self.compressor is not None
