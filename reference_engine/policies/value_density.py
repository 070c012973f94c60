"""`value_density`: evict the entry whose reuse is worth least per byte, with aging.

    value    = expected_reuse × saved_prefill_ms / MiB held
    priority = L + value                          (GDSF: greedy-dual-size-frequency)
    on eviction, L rises to the victim's priority

so an entry that is big, cheap to rebuild or rarely reused goes first, and the inflation value
`L` ages everything else: an entry's priority is fixed when it is (re)inserted or touched,
so entries that stop being used fall behind newer ones as `L` rises, without ever rescanning
the heap. Reuse is estimated from observed hits with a half-life:

    expected_reuse = prior_reuse + Σ over past hits of 0.5 ^ (age of the hit / reuse_half_life_s)

updated at each access. A hit is an entry becoming live again (`remove`: a prefix hit, the
session's next turn); the count survives the entry's time live (`History`) and
is forgotten when the entry is evicted. Blocks tier: `saved_prefill_ms` is a block's share of
its request's prefill; sessions tier: the session's rebuild cost over its retained blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from reference_engine.config import EngineConfig
from reference_engine.memory import MemoryPlan
from reference_engine.policies.base import SESSION_HISTORY_CAPACITY, EntryMeta, History, IndexKind, K
from reference_engine.policies.heap_index import HeapIndex
from reference_engine.policies.policy import Policy

MIB = 1 << 20


class _Reuse(NamedTuple):
    hits: float  # decayed hit count as of `at_s`
    at_s: float
    saved_prefill_ms: float


class ValueDensityIndex(HeapIndex[K]):
    """A `HeapIndex` (invariants and costs there) keyed by GDSF priority. Also keeps, per key in
    the index, its reuse estimate and saved prefill time (`_reuse`: same keys as the heap's
    live set), and the inflation value `inflation` (L), which only grows. Keys never hit cost
    one priority computation and one heap item per insert call, not per key (a released chain
    shares them)."""

    def __init__(
        self, *, bytes_per_block: float, half_life_s: float, prior_reuse: float, history_capacity: int
    ) -> None:
        super().__init__()
        self.inflation = 0.0
        self._mib_per_block = bytes_per_block / MIB
        self._half_life_s = half_life_s
        self._prior = prior_reuse
        self._reuse: dict[K, _Reuse] = {}
        self._history: History[K, _Reuse] = History(history_capacity)

    def expected_reuse(self, reuse: _Reuse, now_s: float) -> float:
        return self._prior + self._decayed(reuse, now_s)

    def _decayed(self, reuse: _Reuse, now_s: float) -> float:
        return reuse.hits * 0.5 ** (max(0.0, now_s - reuse.at_s) / self._half_life_s)

    def _hit(self, reuse: _Reuse, now_s: float) -> _Reuse:
        return _Reuse(self._decayed(reuse, now_s) + 1.0, now_s, reuse.saved_prefill_ms)

    def _repush(self, key: K, reuse: _Reuse, size: int, now_s: float) -> None:
        self._reuse[key] = reuse
        value = self.expected_reuse(reuse, now_s) * reuse.saved_prefill_ms / (size * self._mib_per_block)
        self._push(key, self.inflation + value, size)

    # ------------------------------------------------------- EvictionIndex
    def insert(self, keys: Sequence[K], meta: EntryMeta, now_s: float) -> None:
        saved_ms, size = meta.saved_prefill_s * 1000, meta.size_blocks
        fresh = _Reuse(0.0, now_s, saved_ms)
        fresh_priority = self.inflation + self._prior * saved_ms / (size * self._mib_per_block)
        take, reuse_of = self._history.take, self._reuse
        if self._history.knows_none_of(keys):  # the common case: a chain never hit, in bulk
            reuse_of.update(dict.fromkeys(keys, fresh))
            self._push_many(keys, fresh_priority, size)
            return
        run: list[K] = []  # consecutive never-hit keys: one heap item, in order
        for key in keys:
            past = take(key)
            if past is None:
                reuse_of[key] = fresh
                run.append(key)
            else:
                self._push_many(run, fresh_priority, size)
                run = []
                self._repush(key, _Reuse(past.hits, past.at_s, saved_ms), size, now_s)
        self._push_many(run, fresh_priority, size)

    def remove(self, key: K, now_s: float) -> None:
        self._discard(key)
        self._history.keep(key, self._hit(self._reuse.pop(key), now_s))

    def _evicted(self, keys: list[K], priority: float) -> None:
        reuse = self._reuse
        for key in keys:
            del reuse[key]
        self.inflation = priority


def make_value_density(config: EngineConfig, plan: MemoryPlan) -> Policy:
    cfg = config.value_density

    def make_index(tier: IndexKind) -> ValueDensityIndex:
        capacity = plan.num_blocks if tier is IndexKind.BLOCKS else SESSION_HISTORY_CAPACITY
        return ValueDensityIndex(
            bytes_per_block=plan.bytes_per_block,
            half_life_s=cfg.reuse_half_life_s,
            prior_reuse=cfg.prior_reuse,
            history_capacity=capacity,
        )

    return Policy("value_density", make_index)
