"""`zones` (`[zones] sliding_window_tokens, free_buffer_percent`): the pool as four zones, each
run by a mechanism the engine already has.

    pinned    ≤ kv_cache.pinned_max_percent   public prefixes pinned at warm-up, never evicted
    warm      the rest                         running requests, idle sessions, cached prefix
                                               blocks: least recently used first (`[lru]`)
    window    long histories                   past `sliding_window_tokens`, the oldest KV rolls
                                               out (streamingllm's rule with no sinks)
    buffer    free_buffer_percent              kept free by evicting cached blocks ahead of demand

- **pinned**: the engine's pinned prefixes (`[[prefix_cache.public_prefixes]] pinned = true`,
  loaded by `EngineCore.pin_prefixes` before traffic) under their hard cap; nothing here adds to
  them.
- **warm**: `lru` as `[lru]` configures it, for both tiers.
- **window**: `StreamingLlmCompressor` with no sink tokens: a history that holds a whole block
  more than the window drops its oldest tokens down to the window (a KV prefix shared with
  others, e.g. a pinned system prompt, stays in place), so it never drops KV inside the window
  and never holds more than window + block − 1 tokens. Marked approximate, like streamingllm; on
  a model with its own attention window (which the policy's must equal) what rolls out is what
  the model no longer reads.
- **buffer**: `Policy.free_buffer_blocks`; the scheduler evicts cached blocks at a step's start.
  It never touches live state: live usage is the watermark ladder's (evict rung, preempt rung).
"""

from __future__ import annotations

import dataclasses
import math

from reference_engine.config import EngineConfig
from reference_engine.memory import MemoryPlan
from reference_engine.policies.lru import make_lru
from reference_engine.policies.policy import Policy
from reference_engine.policies.streamingllm import StreamingLlmCompressor, check_model_window


def make_zones(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.zones
    check_model_window("zones.sliding_window_tokens", cfg.sliding_window_tokens, plan)
    # the field bounds (pinned ≤ 50 %, buffer ≤ 25 %) always leave a warm zone
    return dataclasses.replace(
        make_lru(config, plan),
        name="zones",
        compressor=StreamingLlmCompressor(0, cfg.sliding_window_tokens, plan.block_tokens),
        free_buffer_blocks=math.floor(cfg.free_buffer_percent / 100 * plan.num_blocks),
    )
