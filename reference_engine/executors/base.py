"""The executor extension point: what runs a scheduled batch and how long it takes.

The scheduler decides *what* runs; an executor says how long the step took and which token each
finished-prefill/decode sequence sampled. `sim` computes both from a calibrated roofline model
on any machine; `torch` runs a real model over a real paged KV tensor. Both see the same
`StepPlan`, so a policy can be checked for exactness on torch and measured at scale on sim.

A plan may hold for several steps (`StepPlan.num_steps`, set by the scheduler when nothing it
decides can change before then): the executor runs it that many times, stopping early before a
step that would start at or after `StepPlan.stop_s`, and says how long each step it ran took.
An executor that runs one step per plan says so (`max_steps_per_plan = 1`) and never gets more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from reference_engine.request import Request

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np

    from reference_engine.executors.sim_attention import SyntheticAttention

    Attention: TypeAlias = Sequence[float] | SyntheticAttention  # per KV token, or the sim's closed form


@dataclass(slots=True)
class ScheduledChunk:
    """`num_new_tokens` tokens of `request`, starting at its `num_computed_tokens`."""

    request: Request
    num_new_tokens: int

    @property
    def samples(self) -> bool:
        """True when this chunk reaches the end of the known tokens, so a token is sampled."""
        r = self.request
        return r.num_computed_tokens + self.num_new_tokens >= r.num_tokens


@dataclass(slots=True)
class BlockCopy:
    """Blocks moving between device and host for a swap (ids on the device side)."""

    request: Request
    device_blocks: list[int]
    num_bytes: float


class Tier(str, Enum):
    """Where a block of KV content can live: the device pool and the tiers below it."""

    GPU = "gpu"
    HOST = "host"
    DISK = "disk"


@dataclass(slots=True)
class TierTransfer:
    """Cached prefix blocks moving between tiers, each named by its content key (its prefix hash,
    which a lower tier stores it under). `device_blocks` are the GPU block ids, aligned with
    `keys`, when `src` or `dst` is the GPU, and empty otherwise. A demotion (GPU to host or disk)
    reads blocks the engine has just evicted and may reuse in the same plan, so an executor
    applies every transfer out of the GPU, and every move between lower tiers, first of all (in
    list order); a promotion (to the GPU) writes fresh blocks and is applied after the swaps."""

    src: Tier
    dst: Tier
    keys: list[int]
    device_blocks: list[int]
    num_bytes: float


@dataclass(slots=True)
class TierDrop:
    """Blocks a lower tier forgets (evicted from its last tier, or their tier was detached),
    applied after the plan's transfers out of the GPU and between lower tiers. A demotion or a
    move between lower tiers moves a block (the lower source no longer holds it); a promotion
    copies it (tiers are inclusive: the lower tier keeps it). A drop names a tier that holds it."""

    tier: Tier
    keys: list[int]


@dataclass(slots=True)
class KVCompaction:
    """A token-level policy kept some of a request's KV tokens: they move to the front, in order.

    KV index `src[j]` of the table `block_ids` (the request's blocks *before* the compaction)
    moves to KV index `dst_start + j` of the same table; indices below `dst_start` stay put.
    Token `i` of a table lives in block `block_ids[i // block_tokens]` at `i % block_tokens`.
    The engine has already shrunk the request to its first ⌈kept / block_tokens⌉ blocks and
    freed the rest, so an executor holding real KV applies every compaction of a plan *first*,
    before anything of that step writes a block."""

    request: Request
    block_ids: list[int]
    src: Sequence[int] | np.ndarray  # the KV manager passes an int array
    dst_start: int


@dataclass(slots=True)
class StepPlan:
    """One step's work, which holds for up to `num_steps` steps: each runs the same chunks (every
    request's tokens of a step; a request's next chunk starts where its last one ended). Swaps
    and compactions happen once, before the first. The steps run back to back from `start_s`,
    and none starts at or after `stop_s` (the first always runs)."""

    chunks: list[ScheduledChunk] = field(default_factory=list)
    swap_out: list[BlockCopy] = field(default_factory=list)
    swap_in: list[BlockCopy] = field(default_factory=list)
    compactions: list[KVCompaction] = field(default_factory=list)
    tier_transfers: list[TierTransfer] = field(default_factory=list)
    tier_drops: list[TierDrop] = field(default_factory=list)
    num_steps: int = 1
    start_s: float = 0.0
    stop_s: float = math.inf

    @property
    def num_tokens(self) -> int:
        return sum(c.num_new_tokens for c in self.chunks)

    def is_empty(self) -> bool:
        return not (
            self.chunks or self.swap_out or self.swap_in or self.compactions or self.tier_transfers or self.tier_drops
        )


@dataclass(slots=True)
class StepOutcome:
    durations_s: list[float]  # of each step run, in order (at least one)
    sampled: list[list[int]]  # aligned with plan.chunks: the tokens each sampled over the steps, in order
    # Per request id: the attention mass each of its KV tokens (after the step, in KV order)
    # received, summed over the step's queries; from the sim, the same in closed form. One
    # executor gives one kind for every request. Supplied when the policy needs it (h2o).
    attention: Mapping[str, Sequence[float]] | Mapping[str, SyntheticAttention] | None = None
    # Content keys the plan's promotions could not bring back (a lower tier's copy missing or
    # corrupt): their device blocks were not written, and the loads holding them must recompute.
    failed_promotions: frozenset[int] = frozenset()

    @property
    def num_steps(self) -> int:
        return len(self.durations_s)

    @property
    def duration_s(self) -> float:
        return sum(self.durations_s)

    def boundaries_s(self, start_s: float) -> list[float]:
        """Each step's start and the last one's end, accumulated as stepping one by one does
        (t_end = t_start + duration, step after step), so the floats are the same."""
        out, t = [start_s], start_s
        for d in self.durations_s:
            t = t + d
            out.append(t)
        return out


class Executor(Protocol):
    name: str
    max_steps_per_plan: int  # 1: every plan runs one step

    def execute(self, plan: StepPlan) -> StepOutcome: ...

    def prefill_time_s(self, num_tokens: int, num_cached_tokens: int = 0) -> float:
        """Time to (re)compute `num_tokens` of KV on top of `num_cached_tokens` already cached."""
        ...

    def transfer_time_s(self, num_bytes: float) -> float:
        """Time to move `num_bytes` between device and host memory."""
        ...

    def forget(self, request_id: str) -> None:
        """The request ended (any reason, any state): drop what the executor kept for it."""
        ...

    def export_blocks(self, block_ids: Sequence[int]) -> object:
        """A copy of these blocks' KV for another engine (P/D: the prefill side's, sent over the
        link); None from an executor that holds no KV bytes (sim)."""
        ...

    def import_blocks(self, data: object, block_ids: Sequence[int]) -> None:
        """Write another engine's `export_blocks` into these blocks (P/D: the decode side's
        reservation, when the pull lands), in order."""
        ...

    def close(self) -> None:
        """The engine stopped: release what the executor holds beyond its own memory (the torch
        executor's disk tier directory). Idempotent; nothing runs on it afterwards."""
        ...
