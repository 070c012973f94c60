"""The watermark ladder on live KV usage and what each rung switches on.

    NORMAL       below warn
    WARN         >= warn_at_percent (75)             new requests get a shorter max output
    ADMISSION    >= admission_at_percent (82)        long requests stop being admitted
    EVICT        >= evict_at_percent (85)            reusable state (idle sessions) is evicted
    PAUSE_BATCH  >= pause_batch_prefill_at_percent (88)  no new batch prefill
    PREEMPT      >= preempt_at_percent (92)          recoverable work is preempted (hard watermark)
    REJECT       >= reject_at_percent (95)           new non-system requests are rejected

`Watermarks.check_headroom` enforces the design rule that consecutive rungs leave at least one
scheduler step of growth between them; otherwise a single step could jump a rung unseen.
"""

from __future__ import annotations

import math
from enum import IntEnum

from record.errors import ConfigError
from reference_engine.config import GuardConfig


class PressureLevel(IntEnum):
    NORMAL = 0
    WARN = 1
    ADMISSION = 2
    EVICT = 3
    PAUSE_BATCH = 4
    PREEMPT = 5
    REJECT = 6


class Watermarks:
    """Watermarks in blocks for one pool; `level(live_blocks)` is O(levels)."""

    def __init__(self, guard: GuardConfig, num_blocks: int) -> None:
        self.guard = guard
        self.num_blocks = num_blocks
        pct = (
            guard.warn_at_percent,
            guard.admission_at_percent,
            guard.evict_at_percent,
            guard.pause_batch_prefill_at_percent,
            guard.preempt_at_percent,
            guard.reject_at_percent,
        )
        self._thresholds = [math.floor(p / 100 * num_blocks) for p in pct]
        self.warn, self.admission, self.evict, self.pause_batch, self.preempt, self.reject = self._thresholds
        # Batch traffic may never take the interactive reserve.
        self.batch_limit = math.floor((1 - guard.interactive_reserve_percent / 100) * num_blocks)

    def level(self, live_blocks: int) -> PressureLevel:
        level = PressureLevel.NORMAL
        for i, threshold in enumerate(self._thresholds, start=1):
            if live_blocks >= threshold:
                level = PressureLevel(i)
        return level

    def room_below_next_rung(self, live_blocks: int) -> int:
        """How many blocks usage may grow by from `live_blocks` without reaching the next rung
        (crossing any rung is a `watermark` event): what a plan of several steps may add."""
        above = [mark for mark in self._thresholds if mark > live_blocks]
        return above[0] - live_blocks - 1 if above else self.num_blocks - live_blocks

    def check_headroom(self, max_growth_blocks_per_step: int) -> None:
        names = ("warn", "admission", "evict", "pause_batch_prefill", "preempt", "reject")
        for (lo_name, lo), (hi_name, hi) in zip(zip(names, self._thresholds), zip(names[1:], self._thresholds[1:])):
            if hi - lo < max_growth_blocks_per_step:
                raise ConfigError(
                    f"kv_cache.guard: {lo_name} ({lo} blocks) and {hi_name} ({hi} blocks) are closer than one "
                    f"scheduler step can grow ({max_growth_blocks_per_step} blocks with engine.max_num_seqs and "
                    f"engine.max_num_batched_tokens); widen the gap or lower those limits"
                )
