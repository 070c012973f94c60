"""The KV tiers below the GPU pool: where evicted prefix blocks go, and how they come back.

    GPU pool ──evict──▶ host DRAM ──evict──▶ disk ──evict──▶ dropped
        ▲                   │                  │
        └──── load (host link) ◀───────────────┘ (disk read bandwidth)

**Demotion.** When the pool evicts a cached (hashed) block, the block goes to the first tier
instead of being dropped (`demote`, the pool's eviction hook). Write-back runs on a channel of
the tier's write bandwidth; blocks it cannot start within `max_write_backlog_ms` are dropped and
counted (`num_write_dropped`): a burst of evictions never queues unbounded copies. A block the
tier already holds is only touched (tiers are inclusive: a block promoted to the GPU keeps its
copy below, so its next eviction costs no write). A host eviction demotes to disk the same way.

**Promotion.** A request's prefix match continues past the GPU into the tiers (`match`): the
same key (the scoped prefix hash) in host, else disk, block after block until one is in neither.
`price_load` says when the blocks would be on the GPU: each source tier's read channel (host:
the GPU's host link; disk: its read bandwidth) serves loads one after the other, and the two
run in parallel. The scheduler starts the load only when it ends before re-prefilling those
tokens would (the "offload or re-prefill" rule, docs/policies.md); the request then waits for
it without holding the step, and the load's end is a timer of the engine.

**Failure.** A load may fail (`load_failure_rate`, a seeded draw per request: deterministic) or
find a block whose checksum does not match; either way it is known when the load ends, the
request recomputes those tokens, and the tiers forget the blocks (they are suspect).

**Chaos** while the engine runs (the admin API's `/admin/tiers/chaos`, and the engine-level
tests, call the same methods): `detach` / `reattach` a tier, `slow_reads` cuts a tier's read
bandwidth by a factor, `inject_load_failures` sets the failure rate the config's
`load_failure_rate` sets at start.

**Keys.** A tier files a block under its prefix key, scoped like the GPU pool's; a config built
to break isolation (`key_scope` other than `request`) files it under the weak half of a split
key instead (`tier_key`, core/prefix_hash.py), which another salt or tenant computes alike.

**Offload** (the admin API's `/admin/tiers/offload`, the isolation probes' hook): every cached
block leaves the GPU for the host tier, and for the disk, on from the host (`push_down`).

Every block movement is also queued as a `TierTransfer` / `TierDrop` for the next plan
(`take_moves`), so an executor that holds real KV copies the same blocks the sim counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from record.errors import InvalidRequestError
from reference_engine.config.engine_config import TierKeyScope, TiersConfig
from reference_engine.core.prefix_hash import tier_key
from reference_engine.core.tier_store import TierStore
from reference_engine.executors.base import StepPlan, Tier, TierDrop, TierTransfer
from reference_engine.memory import GIB
from reference_engine.stable_id import stable_id

_LOWER = (Tier.HOST, Tier.DISK)


class WriteChannel:
    """A write-back link of `bytes_per_s` that takes no more than `max_backlog_s` of queued work."""

    def __init__(self, bytes_per_s: float, max_backlog_s: float, block_bytes: float) -> None:
        self._block_s = block_bytes / bytes_per_s
        self._max_backlog_s = max_backlog_s
        self.busy_until_s = 0.0

    def admit(self, num_blocks: int, now_s: float) -> int:
        """How many of `num_blocks` writes start within the backlog bound (they are queued)."""
        free_at = max(self.busy_until_s, now_s)
        room_s = now_s + self._max_backlog_s - free_at
        if room_s < 0 or num_blocks <= 0:
            return 0
        n = min(num_blocks, int(room_s // self._block_s) + 1)
        self.busy_until_s = free_at + n * self._block_s
        return n


class ReadChannel:
    """A load link: loads queue one after the other at `bytes_per_s` divided by `slowdown`
    (1 as configured; chaos cuts it, `TieredCache.slow_reads`)."""

    def __init__(self, bytes_per_s: float) -> None:
        self.bytes_per_s = bytes_per_s
        self.slowdown = 1.0
        self.busy_until_s = 0.0

    def ready_s(self, num_bytes: float, now_s: float) -> float:
        rate = self.bytes_per_s / self.slowdown
        return max(self.busy_until_s, now_s) + num_bytes / rate if num_bytes else now_s


@dataclass(slots=True)
class TierLoad:
    """Blocks of a request on their way to the GPU: `keys[i]` from `sources[i]`, into the
    request's blocks from `first_block` on; known to have `failed` only once `ready_s` passes."""

    start_s: float
    ready_s: float
    first_block: int
    keys: list[int]
    sources: list[Tier]
    failed: bool

    def blocks_from(self, tier: Tier) -> int:
        return self.sources.count(tier)


@dataclass(slots=True)
class TierCounters:
    """Cumulative per-tier figures (blocks unless named otherwise)."""

    demoted: int = 0  # written into this tier
    touched: int = 0  # demoted while this tier still held them (inclusive tiers): no write
    write_dropped: int = 0  # evicted above, but the write-back could not take them
    hit: int = 0  # found by a prefix lookup and loaded
    promoted: int = 0  # loads from this tier that completed
    failed: int = 0  # loads from this tier that failed (the request recomputed)
    corrupt_served: int = 0  # failed, and served anyway (fallback off: a broken target)
    slower: int = 0  # found, but re-prefilling was faster: recomputed
    load_s: float = 0.0  # sum of load durations (queueing included) of loads from this tier


@dataclass
class TieredCache:
    """The host and disk tiers of one engine, their channels and their counters."""

    config: TiersConfig
    block_bytes: float
    host_link_bytes_per_s: float
    tenant_shares: Mapping[str, float]
    stores: dict[Tier, TierStore] = field(init=False)
    counters: dict[Tier, TierCounters] = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.config
        self.stores = {}
        for tier, gib in ((Tier.HOST, cfg.host_gib), (Tier.DISK, cfg.disk_gib)):
            blocks = int(gib * GIB // self.block_bytes)
            if blocks > 0:
                caps = {t: int(share * blocks) for t, share in self.tenant_shares.items()}
                self.stores[tier] = TierStore(tier.value, blocks, caps)
        backlog_s = cfg.max_write_backlog_ms / 1000
        host_write = (cfg.host_write_gbps * 1e9) if cfg.host_write_gbps else self.host_link_bytes_per_s
        self._writes = {
            Tier.HOST: WriteChannel(host_write, backlog_s, self.block_bytes),
            Tier.DISK: WriteChannel(cfg.disk_write_gbps * 1e9, backlog_s, self.block_bytes),
        }
        self._reads = {
            Tier.HOST: ReadChannel((cfg.host_read_gbps * 1e9) if cfg.host_read_gbps else self.host_link_bytes_per_s),
            Tier.DISK: ReadChannel(cfg.disk_read_gbps * 1e9),
        }
        self.counters = {t: TierCounters() for t in _LOWER}
        self._moves: list[TierTransfer] = []  # out of the GPU and between tiers: applied first
        self._promotions: list[TierTransfer] = []
        self._drops: list[TierDrop] = []
        self.num_queried_blocks = 0  # blocks looked up below the GPU (past its hits)
        self._splits_keys = cfg.key_scope is not TierKeyScope.REQUEST
        self._route()

    def _keys(self, keys: Sequence[int]) -> list[int]:
        """The keys the tiers file `keys` (prefix keys) under: themselves, unless the config
        drops part of their scope (module docstring, "Keys")."""
        return list(map(tier_key, keys)) if self._splits_keys else list(keys)

    # ------------------------------------------------------------- demotion
    def demote(self, keys: list[int], tenants: list[str | None], blocks: list[int], now_s: float) -> None:
        """The GPU pool evicted cached blocks `blocks` holding `keys` (owned by `tenants`)."""
        items = list(zip(self._keys(keys), tenants, blocks))
        if self._splits_keys:  # blocks of two scopes may share a weak key: the tier takes one
            first = {k: i for i, (k, _, _) in reversed(list(enumerate(items)))}
            items = [it for i, it in enumerate(items) if first[it[0]] == i]
        self._write(Tier.GPU, items, now_s)

    def push_down(self, now_s: float) -> int:
        """Every block of the host tier on to the disk (as host evictions go), the offload hook's
        second half; returns how many left the host."""
        host = self._attached(Tier.HOST)
        if host is None:
            return 0
        items = host.evict_all()
        self._write(Tier.HOST, [(k, t, -1) for k, t in items], now_s)
        return len(items)

    def _next_below(self, tier: Tier) -> Tier | None:
        """Where blocks leaving `tier` go: the next attached tier below it, if any."""
        below = _LOWER if tier is Tier.GPU else _LOWER[_LOWER.index(tier) + 1 :]
        return next((t for t in below if t in self.stores and self.stores[t].attached), None)

    def _route(self) -> None:
        self._below = {t: self._next_below(t) for t in (Tier.GPU, *_LOWER)}

    def _write(self, src: Tier, items: list[tuple[int, str | None, int]], now_s: float) -> None:
        dst = self._below[src]
        if dst is None:
            if src is not Tier.GPU:
                self._drops.append(TierDrop(src, [k for k, _, _ in items]))
            return
        store, counters = self.stores[dst], self.counters[dst]
        fresh = store.not_held(items)
        counters.touched += len(items) - len(fresh)
        taken = self._writes[dst].admit(len(fresh), now_s)
        counters.write_dropped += len(fresh) - taken
        accepted = fresh[:taken]
        evicted = store.put_many([(k, t) for k, t, _ in accepted])
        if evicted:
            in_batch = {k for k, _, _ in accepted}.intersection(k for k, _ in evicted)
            if in_batch:  # evicted by its own batch (a tenant cap smaller than the batch): never written
                counters.write_dropped += len(in_batch)
                accepted = [it for it in accepted if it[0] not in in_batch]
                evicted = [e for e in evicted if e[0] not in in_batch]
            # space first: the blocks moving further down leave before the new ones arrive
            self._write(dst, [(k, t, -1) for k, t in evicted], now_s)
        counters.demoted += len(accepted)
        if src is not Tier.GPU and len(accepted) < len(items):  # their copy above is gone: lost
            kept = {k for k, _, _ in accepted}
            self._drops.append(TierDrop(src, [k for k, _, _ in items if k not in kept]))
        if accepted:
            self._moves.append(
                TierTransfer(
                    src,
                    dst,
                    [k for k, _, _ in accepted],
                    [b for _, _, b in accepted] if src is Tier.GPU else [],
                    len(accepted) * self.block_bytes,
                )
            )

    # ------------------------------------------------------------ promotion
    def match(self, keys: Sequence[int]) -> list[Tier]:
        """A prefix lookup (counted): where each leading key of `keys` lives, see `locate`."""
        self.num_queried_blocks += len(keys)
        return self.locate(keys)

    def locate(self, keys: Sequence[int]) -> list[Tier]:
        """Where each leading key of `keys` lives (host first), up to the first in no tier."""
        out: list[Tier] = []
        host, disk = self._attached(Tier.HOST), self._attached(Tier.DISK)
        for k in self._keys(keys):
            if host is not None and k in host:
                out.append(Tier.HOST)
            elif disk is not None and k in disk:
                out.append(Tier.DISK)
            else:
                break
        return out

    def _attached(self, tier: Tier) -> TierStore | None:
        store = self.stores.get(tier)
        return store if store is not None and store.attached else None

    def price_load(self, sources: Sequence[Tier], now_s: float) -> float:
        """When blocks from `sources` (one tier per block) would all be on the GPU if loaded now."""
        return max(self._reads[t].ready_s(sources.count(t) * self.block_bytes, now_s) for t in set(sources))

    def start_load(
        self, request_id: str, keys: list[int], sources: list[Tier], blocks: list[int], first_block: int, now_s: float
    ) -> TierLoad:
        """Load `keys` into the fresh GPU `blocks`: book the read channels, touch the entries,
        queue the promotions; a seeded draw says whether the load will fail."""
        keys, ready = self._keys(keys), now_s
        for tier in set(sources):
            ch = self._reads[tier]
            ch.busy_until_s = ch.ready_s(sources.count(tier) * self.block_bytes, now_s)
            ready = max(ready, ch.busy_until_s)
        for tier in _LOWER:
            picked = [i for i, s in enumerate(sources) if s is tier]
            if not picked:
                continue
            store = self.stores[tier]
            for i in picked:
                store.touch(keys[i])
            self.counters[tier].hit += len(picked)
            self._promotions.append(
                TierTransfer(
                    tier,
                    Tier.GPU,
                    [keys[i] for i in picked],
                    [blocks[i] for i in picked],
                    len(picked) * self.block_bytes,
                )
            )
        return TierLoad(now_s, ready, first_block, keys, sources, self._fails(request_id, first_block))

    def _fails(self, request_id: str, first_block: int) -> bool:
        rate = self.config.load_failure_rate
        if rate <= 0:
            return False
        draw = stable_id(f"{self.config.failure_seed}:{request_id}:{first_block}") / float(1 << 63)
        return draw < rate

    def worth_loading(self, load_s: float, prefill_s: float) -> bool:
        """The "offload or re-prefill" rule (docs/policies.md): load when the load ends before
        re-prefilling would and within `max_load_wait_ms`. A broken target
        (`fallback_to_recompute` off) loads whatever it finds."""
        cfg = self.config
        return not cfg.fallback_to_recompute or (load_s < prefill_s and load_s <= cfg.max_load_wait_ms / 1000)

    def count_slower(self, sources: Sequence[Tier]) -> None:
        """Blocks found below but recomputed, since loading them was not worth it."""
        for tier in set(sources):
            self.counters[tier].slower += sources.count(tier)

    def finish_load(self, load: TierLoad) -> str:
        """The load's end: `ok` when every block arrived intact (its tier still attached, its
        checksum right); else `failed`: the tiers forget the blocks (their copies are suspect)
        and the caller recomputes them, or, with the fallback off, `served_corrupt`."""
        intact = not load.failed and all(
            self.stores[t].attached and (k not in self.stores[t] or self.stores[t].verify(k))
            for k, t in zip(load.keys, load.sources)
        )
        outcome = "ok" if intact else "failed" if self.config.fallback_to_recompute else "served_corrupt"
        for tier in set(load.sources):
            n, c = load.blocks_from(tier), self.counters[tier]
            c.load_s += load.ready_s - load.start_s
            if intact:
                c.promoted += n
                continue
            c.failed += n
            if outcome == "served_corrupt":
                c.corrupt_served += n
            gone = self.stores[tier].drop([k for k, t in zip(load.keys, load.sources) if t is tier])
            if gone:
                self._drops.append(TierDrop(tier, gone))
        return outcome

    # --------------------------------------------------------------- chaos
    def _configured(self, tier: Tier) -> TierStore:
        store = self.stores.get(tier)
        if store is None:
            raise InvalidRequestError(
                f"this engine has no {tier.value} tier (tiers: {', '.join(t.value for t in self.stores)}); "
                f"[tiers] {tier.value}_gib makes one",
                param="tier",
            )
        return store

    def check_tier(self, tier: Tier) -> None:
        """An `InvalidRequestError` unless this engine has `tier`."""
        self._configured(tier)

    def detach(self, tier: Tier) -> None:
        """The tier went away (a disk unplugged): its blocks are gone; nothing new goes there."""
        store = self._configured(tier)
        gone = store.drop_all()
        store.attached = False
        self._route()
        if gone:
            self._drops.append(TierDrop(tier, gone))

    def reattach(self, tier: Tier) -> None:
        """The tier is back, empty."""
        self._configured(tier).attached = True
        self._route()

    def slow_reads(self, tier: Tier, factor: float) -> None:
        """Loads from `tier` run at its configured read bandwidth divided by `factor` (a link
        shared, a disk throttled); factor 1 restores it. Loads already started keep their time."""
        if not factor >= 1:
            raise InvalidRequestError(
                f"a read slowdown is a factor of at least 1 (1 restores the bandwidth), not {factor}", param="factor"
            )
        self._configured(tier)
        self._reads[tier].slowdown = factor

    def inject_load_failures(self, rate: float) -> None:
        """From now on a share `rate` of loads fails: the config's `load_failure_rate`, changed
        while the engine runs (validated as the config validates it; 0 stops the failures)."""
        try:
            self.config = self.config.model_validate({**self.config.model_dump(), "load_failure_rate": rate})
        except ValidationError as err:
            raise InvalidRequestError(
                f"load_failure_rate is a share of loads in [0, 1], not {rate!r} ({err.errors()[0]['msg']})",
                param="load_failure_rate",
            ) from None

    def chaos_state(self) -> dict[str, object]:
        """What chaos changed: which tiers are attached, each read link's slowdown, the failure rate."""
        return {
            "attached": {t.value: s.attached for t, s in self.stores.items()},
            "read_slowdown": {t.value: self._reads[t].slowdown for t in self.stores},
            "load_failure_rate": self.config.load_failure_rate,
        }

    # ---------------------------------------------------------------- plans
    def take_moves(self, plan: StepPlan) -> None:
        """Put the queued block moves in `plan` when it runs anything (a plan with nothing else
        to run would cost a step: demotions then wait for the next one; a promotion is always
        taken, its plan is the one that starts the load). Moves out of the GPU and between tiers
        come first, promotions after, as the plan's contract says."""
        if not self._promotions and not (plan.chunks or plan.swap_in or plan.swap_out or plan.compactions):
            return
        plan.tier_transfers = [*self._moves, *self._promotions]
        plan.tier_drops = self._drops
        self._moves, self._promotions, self._drops = [], [], []

    # ---------------------------------------------------------- observation
    def used_blocks(self, tier: Tier) -> int:
        store = self.stores.get(tier)
        return len(store) if store is not None else 0

    def usage(self) -> dict[str, int]:
        """Blocks held per configured tier, by tier name: what every usage sample records."""
        return {tier.value: len(store) for tier, store in self.stores.items()}

    def capacity_blocks(self, tier: Tier) -> int:
        store = self.stores.get(tier)
        return store.capacity_blocks if store is not None else 0

    def stats(self) -> dict[str, dict[str, float]]:
        """Per tier: usage and the cumulative counters, as plain numbers (records, metrics)."""
        return {
            tier.value: {
                "capacity_blocks": self.capacity_blocks(tier),
                "used_blocks": self.used_blocks(tier),
                "leaked_blocks": self.stores[tier].num_leaked,
                **dataclasses.asdict(self.counters[tier]),
            }
            for tier in _LOWER
            if tier in self.stores
        }
