"""`h2o` (`[h2o] heavy_hitter_ratio, recent_window_tokens, score_decay`): keep the
heavy hitters by accumulated attention and the recent window, drop the rest.

Token-level and approximate. Per running request the policy accumulates, after every step it
ran in, the attention mass each KV token received, decayed once per step:

    score ← score_decay · score + this step's mass          (new tokens start at their mass)

The executor supplies the mass (`StepOutcome.attention`): the torch executor the model's real
attention (summed over the step's queries, averaged over heads and layers), the sim executor a
documented synthetic distribution (heavy-tailed, with sinks: `executors/sim_attention.py`)
whose decayed sum has a closed form, O(new tokens) per step instead of O(KV tokens). Once a
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

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from reference_engine.config import EngineConfig
from reference_engine.executors.sim_attention import SyntheticAttention, SyntheticScores
from reference_engine.memory import MemoryPlan
from reference_engine.policies.lru_queue import make_lru_index
from reference_engine.policies.policy import Policy
from reference_engine.request import Request

if TYPE_CHECKING:
    from reference_engine.executors.base import Attention


_ONE_KIND = "a request's scores keep the kind of attention its first step had: one executor gives one kind"


class DenseScores:
    """Accumulated scores from attention given per KV token (the torch executor's; or none): the
    recurrence applied as written, O(KV tokens) per step."""

    def __init__(self, decay: float) -> None:
        self.decay = decay
        self._scores = np.zeros(0)

    def __len__(self) -> int:
        return len(self._scores)

    def add_step(self, r: Request, attention: Sequence[float] | None) -> None:
        scores = np.zeros(r.num_kv_tokens)
        scores[: len(self._scores)] = self._scores * self.decay
        if attention is not None:
            assert len(attention) == len(scores), "an executor's attention must cover the request's KV tokens"
            scores += attention
        self._scores = scores

    def values(self) -> np.ndarray:
        return self._scores

    def negated(self, start: int, stop: int) -> np.ndarray:
        return -self._scores[start:stop]

    def keep(self, indices: np.ndarray) -> None:
        self._scores = self._scores[indices]


class H2oCompressor:
    """Keeps, per running request id, its accumulated scores (one per KV token in KV order, as
    of its last step): `SyntheticScores` under the sim, O(new tokens) per step; `DenseScores`
    otherwise, O(KV tokens) per step. A compaction adds an O(KV) partial selection."""

    def __init__(
        self, *, heavy_hitter_ratio: float, recent_tokens: int, score_decay: float, min_tokens: int, block_tokens: int
    ) -> None:
        self.heavy_hitter_ratio = heavy_hitter_ratio
        self.recent_tokens = recent_tokens
        self.score_decay = score_decay
        self.min_tokens = min_tokens
        self.block_tokens = block_tokens
        self._scores: dict[str, DenseScores | SyntheticScores] = {}

    def scores(self, request_id: str) -> np.ndarray | None:
        """The accumulated scores of a running request, in KV order (for tests and inspection)."""
        scores = self._scores.get(request_id)
        return None if scores is None else scores.values()

    def plan_keep(
        self, r: Request, attention: Attention | None, protected_tokens: Callable[[], int], num_steps: int = 1
    ) -> np.ndarray | None:
        n = r.num_kv_tokens
        scores = self._scores.get(r.request_id)
        if scores is None:
            scores = self._scores[r.request_id] = (
                SyntheticScores(attention.seed, self.score_decay)
                if isinstance(attention, SyntheticAttention)
                else DenseScores(self.score_decay)
            )
        if isinstance(scores, SyntheticScores):
            assert isinstance(attention, SyntheticAttention), _ONE_KIND
            if num_steps > 1:  # the steps before the last, at once (only synthetic scores hold for several)
                chunk = attention.num_new
                scores.add_steps(r.num_computed_tokens - chunk * num_steps, chunk, num_steps - 1)
            scores.add_step(r, attention)
        else:
            assert not isinstance(attention, SyntheticAttention), _ONE_KIND
            assert num_steps == 1, "dense scores learn one step at a time (compaction_rule says so)"
            scores.add_step(r, attention)
        if self.heavy_budget(n, r.num_computed_tokens, 0) is None:  # before asking for the protected prefix
            return None
        lo, hi = protected_tokens(), n - self.recent_tokens
        heavy = self.heavy_budget(n, r.num_computed_tokens, lo)
        if heavy is None:
            return None
        kept = np.ones(n, dtype=bool)  # the top `heavy` of lo .. hi by score, in order: a mask, not a sort
        kept[lo:hi] = False
        kept[scores.negated(lo, hi).argpartition(heavy - 1)[:heavy] + lo] = True
        keep = kept.nonzero()[0]
        scores.keep(keep)
        return keep

    def heavy_budget(self, kv_tokens: int, computed_tokens: int, protected_tokens: int) -> int | None:
        """How many heavy hitters a step that leaves a request holding `kv_tokens` of
        `computed_tokens` seen (`protected_tokens` of them shared) keeps, compacting it to
        protected + heavy + recent; None if it does not compact: too short, or no whole block
        to free."""
        heavy = math.ceil(self.heavy_hitter_ratio * computed_tokens)
        if kv_tokens < self.min_tokens or kv_tokens - self.recent_tokens - protected_tokens - heavy < self.block_tokens:
            return None
        return heavy

    def forget(self, request_id: str) -> None:
        self._scores.pop(request_id, None)

    def compaction_rule(self, r: Request, protected_tokens: int) -> HeavyHitterRule | None:
        """When plan_keep compacts follows from lengths (the heavy-hitter budget grows with the
        tokens seen); which tokens it keeps needs the scores, which `plan_keep` brings up to date
        for several steps at once only for synthetic scores in step with `r` (otherwise None:
        `r`'s plans hold for one step)."""
        scores = self._scores.get(r.request_id)
        if not isinstance(scores, SyntheticScores) or not scores.in_step(r):
            return None
        return HeavyHitterRule(self, protected_tokens)


@dataclass(frozen=True, slots=True)
class HeavyHitterRule:
    """`H2oCompressor.heavy_budget` over a request's coming steps. With ratio ≤ 1 the held
    tokens grow at least as fast as the budget, so once a step compacts every later one would:
    the first is found by bisection."""

    h2o: H2oCompressor
    protected_tokens: int

    def next_compaction(self, kv_tokens: int, computed_tokens: int, chunk: int, within: int) -> tuple[int, int] | None:
        budget, protected = self.h2o.heavy_budget, self.protected_tokens

        def heavy(step: int) -> int | None:
            return budget(kv_tokens + step * chunk, computed_tokens + step * chunk, protected)

        step = bisect.bisect_left(range(1, within + 1), True, key=lambda step: heavy(step) is not None) + 1
        held = heavy(step) if step <= within else None  # None past `within`: no step compacts
        return None if held is None else (step, protected + held + self.h2o.recent_tokens)


def make_h2o(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.h2o
    compressor = H2oCompressor(
        heavy_hitter_ratio=cfg.heavy_hitter_ratio,
        recent_tokens=cfg.recent_window_tokens,
        score_decay=cfg.score_decay,
        min_tokens=cfg.min_tokens_to_compress,
        block_tokens=plan.block_tokens,
    )
    return Policy("h2o", make_lru_index, compressor=compressor)
