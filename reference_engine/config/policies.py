"""Per-policy tables, with the key names of the seed articles (`[lru]`, `[multi_queue]`, ...).

Every table is present in every config with its defaults, so switching `kv_cache.policy` is a
one-line change and the digest still names every knob that could have mattered.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LruConfig(_Table):
    """Page/entry LRU over reusable state."""

    max_entries: int = Field(512, ge=1, description="retained sessions kept at most; older ones are evicted")
    evict_batch_size: int = Field(32, ge=1, description="entries evicted per eviction pass at most")
    touch_on_decode: bool = Field(True, description="decode steps refresh the recency of a sequence's blocks")


class MultiQueueConfig(_Table):
    """FIFO 1 (new) -> LRU (re-accessed within the promotion window) ; FIFO 2 (long, active)."""

    fifo1_capacity: int = Field(256, ge=1)
    fifo2_capacity: int = Field(128, ge=1)
    lru_capacity: int = Field(256, ge=1)
    promotion_window_ms: float = Field(5000, gt=0)
    evict_water_level: float = Field(0.85, gt=0, le=1)
    tick_interval_ms: float = Field(200, gt=0)
    long_session_tokens: int = Field(4096, ge=1, description="tokens above which an active entry goes to FIFO 2")
    max_evict_per_tick_percent: float = Field(1.0, gt=0, le=100,
                                              description="share of the pool one tick may evict at most")


class ValueDensityConfig(_Table):
    """GDSF-like: expected_reuse × saved_prefill_ms / bytes, aged by an inflation value."""

    reuse_half_life_s: float = Field(60, gt=0, description="half-life of the observed-hit estimate")
    prior_reuse: float = Field(1.0, ge=0, description="reuse credited to an entry never hit yet")


class StreamingLlmConfig(_Table):
    """Attention sinks + sliding window, token-level and approximate."""

    sink_tokens: int = Field(4, ge=0)
    sliding_window_tokens: int = Field(2048, ge=16)
    evict_outside_window: bool = True


class H2oConfig(_Table):
    """Heavy hitters by decayed accumulated attention + a recent window, approximate."""

    heavy_hitter_ratio: float = Field(0.2, gt=0, le=1)
    recent_window_tokens: int = Field(512, ge=16)
    score_decay: float = Field(0.98, gt=0, le=1)
    min_tokens_to_compress: int = Field(2048, ge=16, description="sequences shorter than this are kept whole")
