"""Per-policy tables, under the key names commonly used for these policies (`[lru]`,
`[multi_queue]`, ...); docs/background.md lists the keys kvgate adds.

Every table is present in every config with its defaults, so switching `kv_cache.policy` is a
one-line change and the digest still names every knob that could have mattered.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ConfigTable(BaseModel):
    """One TOML table of the config: an unknown key is an error (a typo must not pass silently),
    and a loaded config never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LruConfig(ConfigTable):
    """Page/entry LRU over reusable state."""

    max_entries: int = Field(512, ge=1, description="idle sessions kept per tenant at most; older ones are evicted")
    evict_batch_size: int = Field(32, ge=1, description="sessions evicted at once when a tenant passes max_entries")
    touch_on_decode: bool = Field(True, description="decode steps refresh the recency of a sequence's blocks")


class MultiQueueConfig(ConfigTable):
    """FIFO 1 (new) -> LRU (re-accessed within the promotion window) ; FIFO 2 (long, active).

    Capacities count sessions per tenant on the sessions tier and are proportions of the
    cached tier on the blocks tier (see docs/policies.md)."""

    fifo1_capacity: int = Field(256, ge=1)
    fifo2_capacity: int = Field(128, ge=1)
    lru_capacity: int = Field(256, ge=1)
    promotion_window_ms: float = Field(5000, gt=0, description="a second access within this promotes to the LRU")
    evict_water_level: float = Field(
        0.85,
        gt=0,
        le=1,
        description="share of each eviction FIFO 1 supplies; the "
        "LRU supplies this share of the rest, FIFO 2 the remainder",
    )
    tick_interval_ms: float = Field(200, gt=0, description="the evict rung runs once per tick")
    long_session_tokens: int = Field(4096, ge=1, description="tokens above which an active entry goes to FIFO 2")
    fifo2_active_ms: float = Field(
        30_000,
        gt=0,
        description="a FIFO 2 entry not accessed for this long belongs to an ended session and is demoted to the LRU",
    )
    max_evict_per_tick_percent: float = Field(
        1.0, gt=0, le=100, description="share of the pool one tick may evict at most"
    )


class ValueDensityConfig(ConfigTable):
    """GDSF-like: expected_reuse × saved_prefill_ms / bytes, aged by an inflation value."""

    reuse_half_life_s: float = Field(60, gt=0, description="half-life of the observed-hit estimate")
    prior_reuse: float = Field(1.0, ge=0, description="reuse credited to an entry never hit yet")


class StreamingLlmConfig(ConfigTable):
    """Attention sinks + sliding window, token-level and approximate. On a model with its own
    sliding window, `sliding_window_tokens` must equal it."""

    sink_tokens: int = Field(4, ge=0, description="leading tokens always kept (attention sinks)")
    sliding_window_tokens: int = Field(2048, ge=16, description="most recent tokens kept")
    evict_outside_window: bool = Field(True, description="false: keep everything (the policy is then exact)")


class H2oConfig(ConfigTable):
    """Heavy hitters by decayed accumulated attention + a recent window, approximate."""

    heavy_hitter_ratio: float = Field(0.2, gt=0, le=1, description="share of the tokens seen kept as heavy hitters")
    recent_window_tokens: int = Field(512, ge=16, description="most recent tokens always kept")
    score_decay: float = Field(0.98, gt=0, le=1, description="per-step decay of accumulated attention")
    min_tokens_to_compress: int = Field(2048, ge=16, description="sequences shorter than this are kept whole")


class ZonesConfig(ConfigTable):
    """The four zones: pinned prefixes (`kv_cache.pinned_max_percent`, warmed up at start), an
    LRU warm zone, a sliding-window zone for long histories and a free buffer (docs/policies.md).
    On a model with its own sliding window, `sliding_window_tokens` must equal it."""

    sliding_window_tokens: int = Field(
        32768, ge=16, description="a history longer than this rolls its oldest KV out, a whole block at a time"
    )
    free_buffer_percent: float = Field(
        10,
        ge=0,
        le=25,
        description="share of the pool kept free ahead of demand by evicting cached prefix blocks, least recent first",
    )
