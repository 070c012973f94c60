"""A request's whole life in the engine: its tokens, its blocks and everything that must
survive a state change (GPU time, preemption count, recompute tokens, deadline).

Token accounting follows vLLM v1: `num_computed_tokens` of the `num_tokens` known tokens have
KV in the cache; a step schedules some of the rest; a step that reaches `num_tokens` samples one
new output token. A decode step is simply a step that schedules one token. After a recompute
preemption `num_computed_tokens` drops to 0 and the same accounting re-prefills prompt + output.

Who writes what: the engine core fills the intake fields (estimate, reservation, deadline,
session) before it hands a request to the scheduler, and stamps a cancel's arrival; from then on
the scheduler changes its state and counters, and the KV manager alone its blocks (`block_ids`,
`block_hashes`, the tokens a prefix hit computes, the positions a compaction keeps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from reference_engine.config import TrafficClass


class RequestState(str, Enum):
    WAITING = "waiting"  # admitted (or queued), no KV yet
    RUNNING = "running"  # holds blocks, in the batch
    PREEMPTED = "preempted"  # KV dropped, waits to re-prefill ("recomputing" once rescheduled)
    RECOMPUTING = "recomputing"  # rescheduled after a recompute preemption, not yet caught up
    SWAPPED = "swapped"  # KV on the host tier, waits to be swapped back in
    FINISHED = "finished"


class FinishReason(str, Enum):
    STOP = "stop"  # the model ended its answer (the sim's `eos_after`)
    LENGTH = "length"  # reached max_new_tokens
    CANCELLED = "cancelled"  # client cancel or disconnect
    REJECTED = "rejected"  # left the queue without running (queue deadline)
    OOM = "oom"  # an allocation failed with nothing to preempt (the `none` baseline)
    PREEMPTED = "preempted"  # killed to free KV memory (preemption.mode = kill)
    WORKER_LOST = "worker_lost"


class PreemptionKind(str, Enum):
    RECOMPUTE = "recompute"
    SWAP = "swap"
    KILL = "kill"


@dataclass(eq=False, slots=True)
class Request:
    request_id: str
    tenant: str
    traffic_class: TrafficClass
    num_prompt_tokens: int
    max_new_tokens: int
    arrival_s: float
    prompt_token_ids: list[int] | None = None
    # Hashes of the prompt's full blocks, when the caller knows them without tokens (replay).
    prompt_block_hashes: list[int] | None = None
    eos_after: int | None = None  # the sim stops here with finish reason "stop"
    session_id: str | None = None
    streaming: bool = False
    requested_max_new_tokens: int | None = None  # as the client sent it (None: not set)
    public_prefix_tokens: int = 0  # leading tokens hashed in the public scope
    hash_scope: int = 0  # prefix-hash scope of every other block: the tenant's, or its salted one
    tier_scope: int | None = None  # the weaker scope the KV tiers key it by (tiers.key_scope); None: its own
    client_request_id: str | None = None  # the client's X-Request-Id: a label, never a key

    # --- set by the engine
    seq_no: int = 0  # arrival order
    state: RequestState = RequestState.WAITING
    deadline_s: float | None = None  # leave the queue with queue_deadline after this
    queued_s: float = 0.0  # when it last entered the waiting queue: its arrival, or its preemption
    estimated_blocks: int = 0
    pending_blocks: int = 0  # promised at admission, until the request starts
    reserved_tokens: int = 0  # prompt + max_new_tokens, charged to the tenant's budget
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_dropped_tokens: int = 0  # removed by a token-level (approximate) policy
    # Positions of the KV tokens a token-level policy kept at its last compaction (None: none yet).
    kept_positions: np.ndarray | None = None
    block_ids: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_registered_blocks: int = 0  # leading blocks whose hash the pool knows
    # KVCacheManager.shared_prefix_tokens' last answer: (pool sharing epoch, registered blocks, shared blocks)
    shared_prefix_memo: tuple[int, int, int] | None = None
    num_prefix_hit_tokens: int = 0
    num_swapped_blocks: int = 0
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    finish_s: float | None = None
    finish_reason: FinishReason | None = None
    finish_detail: str | None = None
    cancel_received_s: float | None = None
    last_step_s: float = 0.0
    gpu_time_s: float = 0.0
    num_preemptions: int = 0
    consecutive_preemptions: int = 0
    recompute_tokens: int = 0
    swapped_bytes: float = 0.0
    approximate: bool = False
    session_rebuilt: bool = False
    max_tokens_clamped: bool = False
    # Tokens of this request up to which recompute is "catching up" after a preemption.
    recompute_target: int = 0
    # Output tokens after which the request ends (max_new_tokens, or the sim's eos): fixed at
    # creation, kept as a field because every decode step of every request reads it.
    output_limit: int = field(init=False)

    def __post_init__(self) -> None:
        self.output_limit = self.max_new_tokens if self.eos_after is None else min(self.eos_after, self.max_new_tokens)

    @property
    def priority(self) -> int:
        return self.traffic_class.priority

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self.output_token_ids)

    def token_ids(self, start: int, stop: int) -> list[int]:
        """Tokens `start`..`stop` of prompt then output. Only for a request that has its tokens
        (replay's have block hashes instead)."""
        prompt = self.prompt_token_ids
        assert prompt is not None, "a replayed request has no tokens"
        n = len(prompt)
        if stop <= n:
            return prompt[start:stop]
        return prompt[start:] + self.output_token_ids[max(0, start - n) : stop - n]

    @property
    def num_kv_tokens(self) -> int:
        """Tokens whose KV occupies blocks (computed minus those a token-level policy dropped)."""
        return self.num_computed_tokens - self.num_dropped_tokens

    def kv_positions(self, num_new: int = 0, start: int = 0) -> np.ndarray:
        """Absolute positions of the KV tokens from index `start` on (and of the next `num_new`),
        in KV order: those kept at the last compaction, then the ones computed since (contiguous,
        after all the dropped ones). O(tokens returned)."""
        kept = self.kept_positions[start:] if self.kept_positions is not None else np.zeros(0, dtype=np.int64)
        first_fresh = max(start, len(self.kept_positions) if self.kept_positions is not None else 0)
        fresh = np.arange(first_fresh, self.num_kv_tokens + num_new) + self.num_dropped_tokens
        return np.concatenate((kept, fresh)) if len(kept) else fresh

    @property
    def is_finished(self) -> bool:
        return self.state is RequestState.FINISHED

    @property
    def is_prefilling(self) -> bool:
        return self.num_computed_tokens < self.num_tokens - 1 or self.first_token_s is None

    @property
    def max_total_tokens(self) -> int:
        return self.num_prompt_tokens + self.max_new_tokens

    def remaining_output(self) -> int:
        return max(0, self.output_limit - len(self.output_token_ids))
