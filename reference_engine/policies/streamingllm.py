"""`streamingllm` (`[streamingllm] sink_tokens, sliding_window_tokens,
evict_outside_window`): keep the attention sinks and a sliding window, drop the middle.

Token-level and approximate: a long sequence keeps its first `sink_tokens` KV tokens and its
last `sliding_window_tokens`; everything in between is dropped and its blocks freed. Dropping
happens once a whole block can be freed (the cache holds at least `sinks + window +
block_tokens` tokens), so right after a compaction a sequence holds exactly sinks + window
tokens, and never more than sinks + window + block_tokens − 1. A KV prefix shared with other
requests or a session (`protected_tokens`) is never rewritten: it is kept in place of the sinks
when it is longer. Prefix blocks, tiers and sessions are managed as by `lru`.

Alignment with the model (decided: a config error, not a silent fix): a model with its own
sliding window (`ModelSpec.sliding_window_tokens`, e.g. mistral-7b-v0.1's 4,096) never
attends past it, so a policy window of another size either keeps KV the model cannot read or
drops KV it still reads. `sliding_window_tokens` must then equal the model's window.
`evict_outside_window = false` keeps everything: the policy is then `lru`, exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from record.errors import ConfigError
from reference_engine.config import EngineConfig
from reference_engine.memory import MemoryPlan
from reference_engine.policies.lru_queue import make_lru_index
from reference_engine.policies.policy import Policy
from reference_engine.request import Request

if TYPE_CHECKING:
    from reference_engine.executors.base import Attention


class StreamingLlmCompressor:
    """Stateless: the plan depends only on the request's KV length (O(1) to decide, O(kept) to
    build the kept index list, once per `block_tokens` new tokens)."""

    def __init__(self, sink_tokens: int, window_tokens: int, block_tokens: int) -> None:
        self.sink_tokens = sink_tokens
        self.window_tokens = window_tokens
        self.block_tokens = block_tokens

    def plan_keep(
        self, r: Request, attention: Attention | None, protected_tokens: Callable[[], int], num_steps: int = 1
    ) -> np.ndarray | None:
        n, window = r.num_kv_tokens, self.window_tokens
        if n - self.sink_tokens - window < self.block_tokens:  # the rule with nothing protected: cheap
            return None
        rule = self.compaction_rule(r, protected_tokens())
        if n < rule.threshold:
            return None
        return np.concatenate((np.arange(rule.kept - window), np.arange(n - window, n)))

    def forget(self, request_id: str) -> None:
        """Nothing to forget: the plan is a function of the KV length."""

    def compaction_rule(self, r: Request, protected_tokens: int) -> WindowRule:
        """Keep the head (the sinks, or the protected prefix if longer) and the window, once that
        frees a whole block: n − head − window ≥ block_tokens."""
        kept = max(self.sink_tokens, protected_tokens) + self.window_tokens
        return WindowRule(kept + self.block_tokens, kept)


@dataclass(frozen=True, slots=True)
class WindowRule:
    """A step that leaves a request holding `threshold` KV tokens or more compacts it to `kept`."""

    threshold: int
    kept: int

    def next_compaction(self, kv_tokens: int, computed_tokens: int, chunk: int, within: int) -> tuple[int, int] | None:
        step = max(1, -(-(self.threshold - kv_tokens) // chunk))
        return (step, self.kept) if step <= within else None


def check_model_window(key: str, window_tokens: int, plan: MemoryPlan) -> None:
    """A policy window (`key`) on a model with its own sliding window must equal it: the model
    never attends past its window, so any other size keeps KV it cannot read or drops KV it
    still reads."""
    model_window = plan.model.sliding_window_tokens
    if model_window is not None and window_tokens != model_window:
        raise ConfigError(
            f"{key} = {window_tokens} does not match the attention window "
            f"of {plan.model.name} ({model_window} tokens); set it to {model_window}: the model never attends past "
            f"its own window, so any other size keeps KV it cannot read or drops KV it still reads"
        )


def make_streamingllm(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.streamingllm
    check_model_window("streamingllm.sliding_window_tokens", cfg.sliding_window_tokens, plan)
    compressor = None
    if cfg.evict_outside_window:
        compressor = StreamingLlmCompressor(cfg.sink_tokens, cfg.sliding_window_tokens, plan.block_tokens)
    return Policy("streamingllm", make_lru_index, compressor=compressor)
