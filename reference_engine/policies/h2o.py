"""`h2o` (seed 001 `[h2o] heavy_hitter_ratio, recent_window_tokens, score_decay`): keep the
heavy hitters by accumulated attention and the recent window, drop the rest.

Token-level and approximate. Per running request the policy accumulates, after every step it
ran in, the attention mass each KV token received, decayed once per step:

    score ← score_decay · score + this step's mass          (new tokens start at their mass)

The executor supplies the mass (`StepOutcome.attention`): the torch executor the model's real
attention (summed over the step's queries, averaged over heads and layers), the sim executor a
documented synthetic distribution (heavy-tailed, with sinks: `executors/sim.py`). Once a
sequence holds `min_tokens_to_compress` tokens, whenever a whole block can be freed it keeps

    the last `recent_window_tokens` tokens
    + the top ⌈heavy_hitter_ratio × tokens seen so far⌉ of the others by score
    + a KV prefix shared with other requests or a session, if any (never rewritten)

and drops everything else. Paged blocks: the kept tokens are compacted to the front of the
request's blocks, in their original order, so it needs ⌈kept / block_tokens⌉ blocks and the
rest are freed (`KVCacheManager.compact`); the torch executor really moves the kept K/V (keys
are stored after RoPE, so every token keeps its position) and the dropped tokens are gone.
Prefix blocks, tiers and sessions are managed as by `lru`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from reference_engine.config import EngineConfig
from reference_engine.core.request import Request
from reference_engine.memory import MemoryPlan
from reference_engine.policies.lru_queue import make_lru_index
from reference_engine.policies.policy import Policy


class H2oCompressor:
    """Keeps, per running request id, one float64 score per KV token in KV order (`_scores`;
    its length is the request's KV length after its last step). Costs per step a request runs:
    O(kv tokens) vectorised to accumulate; a compaction adds an O(kv) partial selection."""

    def __init__(self, *, heavy_hitter_ratio: float, recent_tokens: int, score_decay: float,
                 min_tokens: int, block_tokens: int) -> None:
        self.heavy_hitter_ratio = heavy_hitter_ratio
        self.recent_tokens = recent_tokens
        self.score_decay = score_decay
        self.min_tokens = min_tokens
        self.block_tokens = block_tokens
        self._scores: dict[str, np.ndarray] = {}

    def scores(self, request_id: str) -> np.ndarray | None:
        """The accumulated scores of a running request, in KV order (for tests and inspection)."""
        return self._scores.get(request_id)

    def plan_keep(self, r: Request, attention: Sequence[float] | None,
                  protected_tokens: Callable[[], int]) -> np.ndarray | None:
        n = r.num_kv_tokens
        scores = self._accumulate(r.request_id, attention, n)
        heavy = math.ceil(self.heavy_hitter_ratio * r.num_computed_tokens)
        if n < self.min_tokens or n - self.recent_tokens - heavy < self.block_tokens:
            return None
        lo, hi = protected_tokens(), n - self.recent_tokens
        if hi - lo - heavy < self.block_tokens:
            return None
        top = np.argpartition(-scores[lo:hi], heavy - 1)[:heavy]
        keep = np.concatenate((np.arange(lo), np.sort(top) + lo, np.arange(hi, n)))
        self._scores[r.request_id] = scores[keep]
        return keep

    def forget(self, request_id: str) -> None:
        self._scores.pop(request_id, None)

    def _accumulate(self, request_id: str, attention: Sequence[float] | None, n: int) -> np.ndarray:
        scores = np.zeros(n)
        prev = self._scores.get(request_id)
        if prev is not None:
            scores[: len(prev)] = prev * self.score_decay
        if attention is not None:
            assert len(attention) == n, "an executor's attention must cover the request's KV tokens"
            scores += attention
        self._scores[request_id] = scores
        return scores


def make_h2o(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.h2o
    compressor = H2oCompressor(heavy_hitter_ratio=cfg.heavy_hitter_ratio, recent_tokens=cfg.recent_window_tokens,
                               score_decay=cfg.score_decay, min_tokens=cfg.min_tokens_to_compress,
                               block_tokens=plan.block_tokens)
    return Policy("h2o", make_lru_index, compressor=compressor)
