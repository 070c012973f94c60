"""eviction_thrash: retained state is not thrown away without pressure (< 1 % of the pool/s).

Evictions come in two kinds. Those that pressure asks for — the evict rung (`watermark`), an
allocation the pool could not serve (`capacity`), a tenant at its cap (`tenant_quota`) — are
the engine answering a load larger than the pool: once context arrives faster than it can be
kept, their rate is the rate at which new context arrives, the same for every healthy policy,
so they are reported (by reason, and how many of the evicted sessions came back for their
context and had to be rebuilt) and judged by what they cost elsewhere (TTFT, goodput), not by
their rate. Thrash is eviction *without* pressure: a policy that throws idle sessions away
while the pool has room (its own capacity limits: `overflow`), so that conversations are
rebuilt for nothing. That is judged, in blocks per second of the load phase, as a fraction of
the pool; the busiest second is kept as evidence.

Cached prefix blocks reclaimed for reuse (`meta.final.num_evicted_cached_blocks`) are reported
beside it, not judged by the rate. They are refcount-0 blocks — free memory, as vLLM counts
them — and once the cache has filled the pool, every new prompt block reclaims one: their rate
is the rate of new unique prompt tokens, the same under every policy for the same load. Whether
the cached tier keeps what is reused is what the prefix hit rate says
(`record.query.prefix_hit_rate`): when the log has prompt sizes (`num_tokens` of the `admitted`
or `queued` event each request emits on arrival) and prefix-cache hits (`scheduled.num_tokens`),
it is bounded below by `min_prefix_hit_rate`, whose default 0 leaves it off, since a healthy
rate depends on how much the workload shares.

A target without engine events but with vLLM's KV cache events (`kvgate run --kv-events`,
harness/collectors/kv_events.py) is judged from those: vLLM keeps no retained state, and
removes a cached block only when an allocation finds no free one, so every removal is asked for
by pressure; the blocks removed and those stored again after their removal (a prefix thrown away
and computed again) are reported, and the hit rate comes from its prefix-cache counters over the
run (`record.query.counter_prefix_hit_rate`).
"""

from __future__ import annotations

import math

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import (
    WHOLE_RUN,
    counter_prefix_hit_rate,
    events_of,
    in_window,
    load_window,
    pool_blocks,
    prefix_hit_rate,
    window_duration_s,
)
from record.run_record import RunRecord

PRESSURE_REASONS = ("watermark", "capacity", "tenant_quota")
"""`evicted.reason`s that pressure asked for (record/events.py)."""


class EvictionThrashGate:
    name = "eviction_thrash"
    sources = (Source.ENGINE_EVENTS, Source.KV_EVENTS, Source.PROMETHEUS)
    title = "No eviction thrash"
    metrics = {
        "max_unforced_evicted_fraction_per_s": (
            "blocks of retained state (idle sessions) evicted without pressure per second under load / pool"
        ),
        "min_prefix_hit_rate": (
            "prefix-cache hit tokens / prompt tokens of the requests scheduled under load (0: not judged)"
        ),
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        if not record.meta.signals.engine_events:
            return self._from_kv_events(record, limits)
        num_blocks = pool_blocks(record)
        window = load_window(record.meta)
        duration_s = window_duration_s(record, window)
        if not num_blocks or not duration_s:
            return GateResult.not_measurable(self.name, "pool size or load duration unknown")
        evicted = in_window(events_of(record, "evicted"), "t_s", window)
        unforced = evicted[~evicted["reason"].isin(PRESSURE_REASONS)]
        blocks = unforced["num_blocks"].fillna(1)
        blocks_per_s = float(blocks.sum()) / duration_s
        rate = blocks_per_s / num_blocks
        evidence: dict = {
            "unforced_evicted_blocks": float(blocks.sum()),
            "num_unforced_evictions": len(unforced),
            "evicted_blocks": float(evicted["num_blocks"].fillna(1).sum()),
            "num_evictions": len(evicted),
            "pool_blocks": num_blocks,
            "load_s": duration_s,
        }
        if len(evicted):
            evidence["evicted_by_reason"] = evicted["reason"].value_counts().to_dict()
            evidence["evicted_sessions_that_came_back"] = _came_back(record, evicted)
        if len(unforced):
            per_second = blocks.groupby(unforced["t_s"].map(math.floor)).sum()
            evidence["busiest_second"] = {"t_s": int(per_second.idxmax()), "evicted_blocks": per_second.max()}
        measurements = [
            Measurement(
                "max_unforced_evicted_fraction_per_s",
                rate,
                limits["max_unforced_evicted_fraction_per_s"],
                Unit.FRACTION_PER_S,
            )
        ]
        explanation = (
            f"{blocks_per_s:.1f} blocks of retained state evicted per second without pressure "
            f"({rate:.3%} of the pool/s); {len(evicted) - len(unforced)} evictions under pressure"
        )
        cached = record.meta.final.get("num_evicted_cached_blocks")
        run_s = window_duration_s(record, WHOLE_RUN)
        if cached is not None and run_s:
            evidence["evicted_cached_blocks"] = cached
            evidence["cached_reclaimed_fraction_per_s"] = float(cached) / run_s / num_blocks
            explanation += f"; {cached:.0f} cached prefix blocks reclaimed for reuse (reported, not judged)"
        hit_rate = prefix_hit_rate(record, window)
        if hit_rate is not None:
            measurements.append(
                Measurement("min_prefix_hit_rate", hit_rate, limits["min_prefix_hit_rate"], Unit.FRACTION, is_max=False)
            )
            explanation += f"; prefix hit rate {hit_rate:.1%}"
        return GateResult.judged(self.name, measurements, explanation, evidence)

    def _from_kv_events(self, record: RunRecord, limits: Limits) -> GateResult:
        final = record.meta.final
        hit_rate = counter_prefix_hit_rate(record.meta)
        evidence = {"prefix_hit_rate": hit_rate}
        if "kv_blocks_removed" not in final:
            return GateResult.not_measurable(
                self.name,
                "no engine events and no KV cache events: evictions are unknown "
                "(vLLM: --kv-events-config on the server, kvgate run --kv-events)",
                evidence,
            )
        if hit_rate is None:
            return GateResult.not_measurable(
                self.name,
                "KV events arrived but the target reports no prefix-cache counters: reuse is unknown",
                evidence,
            )
        evidence.update(
            {
                k: final[k]
                for k in (
                    "kv_blocks_stored",
                    "kv_blocks_removed",
                    "kv_blocks_restored",
                    "kv_all_cleared",
                    "kv_batches_missed",
                )
                if k in final
            }
        )
        explanation = (
            f"from KV cache events: {final['kv_blocks_removed']} cached blocks removed on allocation "
            f"(all under pressure: no retained state), {final.get('kv_blocks_restored', 0)} of them "
            f"computed again later; prefix hit rate {hit_rate:.1%} over the run"
        )
        if final.get("kv_batches_missed"):
            explanation += f"; {final['kv_batches_missed']} event batches lost"
        return GateResult.judged(
            self.name,
            [Measurement("min_prefix_hit_rate", hit_rate, limits["min_prefix_hit_rate"], Unit.FRACTION, is_max=False)],
            explanation,
            evidence,
        )


def _came_back(record: RunRecord, evicted: pd.DataFrame) -> int:
    """Evicted sessions whose conversation sent another turn after the eviction (it found its
    context gone: rebuilt, or 410 context_expired)."""
    last_turn = record.requests.groupby("session_id")["sent_s"].max()
    return int((evicted["request_id"].map(last_turn) > evicted["t_s"]).sum())
