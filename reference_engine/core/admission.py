"""Admission control: decide before a request enters the run queue, while refusing or queueing
it is still cheaper than preempting it halfway.

The estimate is the worst-case commitment: `ceil((prompt + max_new_tokens) · safety / block)`
blocks (a missing max_tokens means `max_new_tokens_default`, never "the client will stop soon").
The outcome is one of three, never an unbounded queue:

- **admit**: it fits now under its class limit;
- **queue**: it could fit once memory frees up; it waits with a deadline (`queue_deadline_ms`)
  and leaves with 429 `queue_deadline` if it is not running by then;
- **reject**: 429 `kv_capacity` (above the reject watermark, larger than its class may ever
  hold, or the queue is full) or 429 `tenant_quota` (the tenant's share, sequences or token
  budget: `TenantLimit` says which), with a Retry-After hint; 400 `context_length_exceeded`
  before any of that.

Class limits, in blocks of live usage after the request: system and interactive up to the hard
(preempt) watermark, long requests (≥ `long_request_tokens`) only up to the admission watermark,
batch never into the interactive reserve. A tenant's worst-case reservations plus its retained
sessions may never exceed its hard share, so its live share cannot cross the cap later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from record.errors import CapacityError, ContextLengthError
from reference_engine.config import EngineConfig, TrafficClass
from reference_engine.core.tenants import TenantState
from reference_engine.core.watermarks import Watermarks
from reference_engine.request import Request


class AdmissionAction(str, Enum):
    """What admission does with a request (module docstring): admit it, queue it or reject it."""

    ADMIT = "admit"
    QUEUE = "queue"
    REJECT = "reject"


class TenantLimit(str, Enum):
    """The tenant limit behind a `tenant_quota` refusal (the `mode` of its `rejected` event)."""

    KV_SHARE = "kv_share"  # reservations + retained sessions + this estimate over max_kv_share
    ACTIVE_SEQS = "active_seqs"  # max_active_seqs requests already queued or running
    RESERVED_TOKENS = "reserved_tokens"  # max_reserved_tokens already reserved


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    action: AdmissionAction
    estimated_blocks: int
    reason: str | None = None  # for rejects: kv_capacity | tenant_quota
    message: str = ""
    retry_after_s: float | None = None
    limit: TenantLimit | None = None  # for tenant_quota: which limit

    def to_error(self) -> CapacityError:
        return CapacityError(
            self.message,
            code=self.reason,
            retry_after_s=self.retry_after_s,
            limit=None if self.limit is None else self.limit.value,
        )


class AdmissionController:
    def __init__(
        self,
        config: EngineConfig,
        marks: Watermarks,
        block_tokens: int,
        max_context_tokens: int,
        enabled: bool,
        tenant_caps: bool,
        max_pool_tokens: int | None = None,
    ) -> None:
        self.cfg = config.admission
        self.guard = config.kv_cache.guard
        self.marks = marks
        self.block_tokens = block_tokens
        self.max_context_tokens = max_context_tokens
        self.enabled = enabled
        self.tenant_caps = tenant_caps
        self.max_pool_tokens = max_pool_tokens
        """Requests larger than the whole pool are refused; None (a policy that never preempts) lets them OOM."""

    # ------------------------------------------------------------ static checks
    def resolve_max_new_tokens(self, requested: int | None, live_blocks: int) -> tuple[int, bool]:
        """The output budget granted: the default if unset, shortened above the warn watermark."""
        granted = self.cfg.max_new_tokens_default if requested is None else requested
        if self.enabled and live_blocks >= self.marks.warn and granted > self.guard.warn_max_new_tokens:
            return self.guard.warn_max_new_tokens, True
        return granted, False

    def check_context(self, num_prompt_tokens: int, max_new_tokens: int, tenant: TenantState) -> None:
        total = num_prompt_tokens + max_new_tokens
        if total > self.max_context_tokens:
            raise ContextLengthError(
                f"this model's maximum context length is {self.max_context_tokens} tokens; the request has "
                f"{num_prompt_tokens} prompt tokens + max_tokens {max_new_tokens} = {total}. Shorten the prompt "
                f"or lower max_tokens.",
                param="messages",
            )
        pool_tokens = self.max_pool_tokens
        if pool_tokens is not None and total > pool_tokens:
            # What vLLM refuses at start (a max_model_len the KV cache cannot hold), per request:
            # a sequence larger than the whole pool could never finish. Without this, a policy
            # without admission starts it, preempts it when the pool fills, and it waits forever.
            # Only a policy that never preempts (the `none` baseline, a bare generate loop) lets
            # the allocation fail instead: that OOM is the failure it exists to show.
            raise ContextLengthError(
                f"the KV cache holds {pool_tokens} tokens; this request needs {num_prompt_tokens} prompt tokens "
                f"+ max_tokens {max_new_tokens} = {total}, more than the whole cache could ever hold. Shorten "
                f"the prompt or lower max_tokens.",
                param="messages",
            )
        limit = tenant.config.max_context_tokens
        if limit is not None and total > limit:
            raise ContextLengthError(
                f"tenant {tenant.name!r} may use at most {limit} tokens per request (prompt + max_tokens); "
                f"this one asks for {total}.",
                param="max_tokens",
            )

    def estimate_blocks(self, r: Request) -> int:
        return self.blocks_for_tokens(r.max_total_tokens)

    def blocks_for_tokens(self, num_tokens: int) -> int:
        """The worst-case blocks of a request of `num_tokens` (prompt + output), safety included."""
        return math.ceil(num_tokens * self.cfg.estimate_safety / self.block_tokens)

    # ---------------------------------------------------------------- decision
    def class_limit(self, r: Request) -> int:
        m = self.marks
        limit = m.preempt
        if r.traffic_class is TrafficClass.BATCH:
            limit = min(limit, m.batch_limit)
        if r.traffic_class is not TrafficClass.SYSTEM and r.max_total_tokens >= self.guard.long_request_tokens:
            limit = min(limit, m.admission)
        return limit

    def tenant_block_overage(self, tenant: TenantState, need_blocks: int, session_blocks: int) -> int:
        """Blocks by which this request would put `tenant` over its hard share (0: it fits)."""
        held = tenant.reserved_blocks + tenant.retained_blocks - session_blocks
        return max(0, held + need_blocks - tenant.max_blocks)

    def check_tenant(
        self, r: Request, tenant: TenantState, need_blocks: int, session_blocks: int
    ) -> AdmissionDecision | None:
        """A tenant_quota rejection, or None if the tenant may take this request."""
        if not self.tenant_caps:
            return None
        c = tenant.config
        refused = self.tenant_slot_limit(r, tenant)
        if refused is None and self.tenant_block_overage(tenant, need_blocks, session_blocks):
            refused = (
                TenantLimit.KV_SHARE,
                f"tenant {tenant.name!r} would hold more than its KV share cap ({c.max_kv_share:.0%} = "
                f"{tenant.max_blocks} blocks): {tenant.reserved_blocks} reserved + {tenant.retained_blocks} "
                f"retained + {need_blocks} for this request",
            )
        if refused is None:
            return None
        limit, why = refused
        return AdmissionDecision(
            AdmissionAction.REJECT,
            need_blocks,
            "tenant_quota",
            why + "; retry later or lower max_tokens",
            retry_after_s=1.0,
            limit=limit,
        )

    def tenant_slot_limit(self, r: Request, tenant: TenantState) -> tuple[TenantLimit, str] | None:
        """The limit that stops the tenant from starting this request whatever KV it frees
        (max_active_seqs, max_reserved_tokens) and why, or None. Checked before the share cap,
        which evicting can cure."""
        c = tenant.config
        if tenant.active_seqs >= c.max_active_seqs:
            return (
                TenantLimit.ACTIVE_SEQS,
                f"tenant {tenant.name!r} already has {tenant.active_seqs} active requests (max_active_seqs)",
            )
        if tenant.reserved_tokens + r.max_total_tokens > c.max_reserved_tokens:
            return (
                TenantLimit.RESERVED_TOKENS,
                f"tenant {tenant.name!r} has {tenant.reserved_tokens} tokens reserved; this request's "
                f"{r.max_total_tokens} would pass max_reserved_tokens {c.max_reserved_tokens}",
            )
        return None

    def decide(
        self, r: Request, need_blocks: int, projected_live_blocks: int, live_blocks: int, queue_len: int
    ) -> AdmissionDecision:
        """Pool-level decision for a request whose tenant check passed.

        `projected_live_blocks`: live usage that cannot be reclaimed + blocks promised to requests
        admitted but not yet running; `live_blocks`: current live usage (for the reject rung)."""
        if not self.enabled:
            return AdmissionDecision(AdmissionAction.ADMIT, need_blocks)
        limit = self.class_limit(r)
        if projected_live_blocks + need_blocks <= limit:
            return AdmissionDecision(AdmissionAction.ADMIT, need_blocks)
        if r.traffic_class is not TrafficClass.SYSTEM and live_blocks >= self.marks.reject:
            return AdmissionDecision(
                AdmissionAction.REJECT,
                need_blocks,
                "kv_capacity",
                f"KV cache is {100 * live_blocks / self.marks.num_blocks:.0f}% full "
                f"(reject watermark {self.guard.reject_at_percent:.0f}%); retry after the "
                f"Retry-After delay",
                retry_after_s=2.0,
            )
        if need_blocks > limit:
            return AdmissionDecision(
                AdmissionAction.REJECT,
                need_blocks,
                "kv_capacity",
                f"the request needs {need_blocks} KV blocks (prompt + max_tokens, worst "
                f"case) but a {r.traffic_class.value} request may use at most {limit} of "
                f"{self.marks.num_blocks}; lower max_tokens or shorten the prompt",
            )
        if queue_len >= self.cfg.max_queue_len:
            return AdmissionDecision(
                AdmissionAction.REJECT,
                need_blocks,
                "kv_capacity",
                f"the admission queue is full ({queue_len} requests); retry later",
                retry_after_s=2.0,
            )
        return AdmissionDecision(AdmissionAction.QUEUE, need_blocks)
