"""Continuous batching with chunked prefill, watermark actions and preemption.

One `schedule(now)` builds the next step under a token budget, in this order:

1. **housekeeping**: queue deadlines (429 `queue_deadline`), idle sessions past their timeout;
2. **pressure**: a policy's free buffer evicts cached blocks until its share of the pool is
   free; at the evict rung idle sessions are evicted (on the policy's tick, at most its
   per-tick share); at the hard (preempt) rung running work is preempted until usage is below it;
3. **running** requests continue: every decode first, then the next prefill chunks (while
   requests wait: each chunk capped, several together leaving a chunk's worth for the waiting).
   When the pool cannot grow one, idle sessions are reclaimed first (under every policy that
   retains any), then a victim is preempted (maybe the request itself); with preemption off,
   the allocation fails as an OOM (the `none` baseline fails the batch);
4. **swapped** requests come back when they fit;
5. **waiting** requests start, best effective priority first (see `WaitingQueue`), if their class
   limit allows (admission rules), batch not paused, and no preemption happened this step; a
   chat-sized prompt starts whole or waits a step (never on a step's last scraps); the batch
   share of the budget (`min_batch_token_share`) goes to the batch head however many
   higher-priority requests wait ahead of it. A start (or a recompute's restart) whose prefix
   goes on in a KV tier below the GPU (`core/tiers.py`) loads those blocks first when that beats
   re-prefilling them: the request holds its slot and runs nothing until the load ends, which is
   one of the timers.

**A plan holds for several steps** when the caller can take them (replay: `schedule(now,
stop_s)`): every rule's owner says how long its decision stands — a running request until it
finishes, samples its first token or its prefill chunk would change; the compressor until its
next compaction; the waiting queue while nobody can start; the watermarks until the next rung;
the pool while it can give the blocks; the timers and the caller's stop time — and the plan
carries the least of them (`StepPlan.num_steps`, `_num_steps_held`). The executor runs it that
many times and `update` applies them all through the path a single step takes. Stepping one by
one takes the same decisions at the same times: the results are identical, float for float.

`update(plan, outcome, boundaries)` applies a finished plan: the blocks its later steps grew
into (at each step's start), computed tokens, sampled tokens, first token and finish events,
hashes of blocks that became full, token-level compression (the policy's compressor sees each
request's attention; the KV moves it implies travel in the next step's plan,
`StepPlan.compactions`, which an executor applies before anything else).

The scheduler owns the request states and the tenant ledger lines; it is the only writer of both.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from record.events import EventKind
from reference_engine.config import EngineConfig, TrafficClass
from reference_engine.core.admission import AdmissionController
from reference_engine.core.event_log import EventLog
from reference_engine.core.host_tier import HostTier
from reference_engine.core.kv_manager import KVCacheManager
from reference_engine.core.preemption import choose_mode, pick_victim
from reference_engine.core.sessions import Session, SessionStore
from reference_engine.core.tenants import TenantRegistry
from reference_engine.core.tiers import TieredCache, TierLoad
from reference_engine.core.waiting_queue import WaitingQueue
from reference_engine.core.watermarks import PressureLevel, Watermarks
from reference_engine.executors.base import (
    BlockCopy,
    Executor,
    KVCompaction,
    ScheduledChunk,
    StepOutcome,
    StepPlan,
    Tier,
)
from reference_engine.memory import MemoryPlan
from reference_engine.policies.base import EntryMeta
from reference_engine.policies.policy import Compressor, Policy
from reference_engine.request import FinishReason, PreemptionKind, Request, RequestState

if TYPE_CHECKING:
    from reference_engine.executors.base import Attention

_MAX_SKIPS_PER_STEP = 16  # waiting requests tried and put back per step, at most
_ALL_BUT_BATCH = frozenset(c for c in TrafficClass if c is not TrafficClass.BATCH)


@dataclass(slots=True)
class RequestOutput:
    """What one step produced for one request: new tokens, and whether it ended."""

    request: Request
    new_token_ids: list[int] = field(default_factory=list)
    finished: bool = False


class Scheduler:
    def __init__(
        self,
        config: EngineConfig,
        plan: MemoryPlan,
        policy: Policy,
        kv: KVCacheManager,
        sessions: SessionStore,
        tenants: TenantRegistry,
        admission: AdmissionController,
        marks: Watermarks,
        events: EventLog,
        executor: Executor,
        host: HostTier,
        tiers: TieredCache | None = None,
    ) -> None:
        self.config = config
        self.plan = plan
        self.policy = policy
        self.kv = kv
        self.pool = kv.pool
        self.sessions = sessions
        self.tenants = tenants
        self.admission = admission
        self.marks = marks
        self.events = events
        self.executor = executor
        self.host = host
        self.tiers = tiers
        self.loads: dict[str, TierLoad] = {}  # request id -> its blocks on their way from a lower tier
        self.max_num_seqs = config.engine.max_num_seqs
        self.token_budget = config.engine.max_num_batched_tokens
        self.long_prefill_cap = config.engine.long_prefill_token_threshold
        self.preempt_cfg = config.preemption
        self.preemption_mode = policy.preemption_mode or config.preemption.mode
        self.requests: dict[str, Request] = {}
        self.running: dict[str, Request] = {}  # insertion order = order they started
        self.waiting = WaitingQueue(config.preemption.aging_s, fcfs=policy.fcfs)
        self.swapped: dict[str, Request] = {}
        self.session_of: dict[str, Session] = {}
        self.pending_blocks = 0  # admitted, not yet started: promised blocks
        self._promised: dict[str, Request] = {}  # the requests those blocks are promised to
        self.prefilling: dict[str, Request] = {}  # running, prompt (or recompute) not done yet
        self.num_pinned_blocks = 0
        self.level = PressureLevel.NORMAL
        self._next_session_tick_s = 0.0
        self._compactions: list[KVCompaction] = []  # planned in update(), applied by the next step
        self.num_preemptions = {k: 0 for k in PreemptionKind}
        self.num_oom = 0
        self.recompute_tokens = 0
        self.approximated_tokens = 0
        self.num_buffer_evicted_blocks = 0  # cached blocks evicted ahead of demand (free buffer)
        self.num_evicted_sessions: dict[str, int] = {}  # by reason
        self.num_evicted_session_blocks: dict[str, int] = {}  # by reason

    # ------------------------------------------------------------------ usage
    @property
    def live_blocks(self) -> int:
        return self.pool.num_live

    def reclaimable_blocks(self) -> int:
        """Live blocks held only by idle sessions: what eviction can give back."""
        return max(0, self.pool.num_retained - self.num_pinned_blocks)

    def committed_prefill_blocks(self) -> int:
        """Blocks that running prefills will still allocate: promised, not yet live."""
        blocks_for = self.kv.blocks_for
        return sum(max(0, blocks_for(r.num_tokens) - len(r.block_ids)) for r in self.prefilling.values())

    def projected_blocks(self) -> int:
        """Usage admission plans against: live minus reclaimable plus everything promised."""
        return self.live_blocks - self.reclaimable_blocks() + self.committed_prefill_blocks() + self.pending_blocks

    # ------------------------------------------------------------- lifecycle
    def add(self, r: Request, admitted: bool, session: Session | None) -> None:
        self.requests[r.request_id] = r
        if session is not None:
            self.session_of[r.request_id] = session
        tenant = self.tenants[r.tenant]
        tenant.active_seqs += 1
        tenant.reserved_tokens += r.reserved_tokens
        tenant.reserved_blocks += r.estimated_blocks
        if admitted:
            r.pending_blocks = r.estimated_blocks
            self.pending_blocks += r.pending_blocks
            self._promised[r.request_id] = r
        r.state, r.queued_s = RequestState.WAITING, r.arrival_s
        self.waiting.enqueue(r)

    def _meta(self, r: Request, active: bool = False) -> EntryMeta:
        """What the policy learns about `r`'s blocks as they become reusable; `active`: `r` (or
        its session) goes on and may come back for them."""
        per_block = self.executor.prefill_time_s(self.kv.block_tokens, max(0, r.num_prompt_tokens // 2))
        return EntryMeta(
            size_blocks=1,
            tokens=r.num_tokens,
            tenant=r.tenant,
            priority=r.priority,
            saved_prefill_s=per_block,
            is_active=active,
            last_access_s=None if self.policy.touch_on_decode else r.first_scheduled_s,
        )

    def finish(self, r: Request, reason: FinishReason, now_s: float, detail: str | None = None) -> None:
        """End `r` for any reason: release its KV, its reservation and its session turn."""
        if r.is_finished:
            return
        prev = r.state
        if prev is RequestState.RUNNING or prev is RequestState.RECOMPUTING:
            del self.running[r.request_id]
            self.prefilling.pop(r.request_id, None)
            self.loads.pop(r.request_id, None)  # its blocks never became a prefix: freed below
        elif prev is RequestState.SWAPPED:
            del self.swapped[r.request_id]
            self.host.drop(r.swapped_bytes)
        elif prev in (RequestState.WAITING, RequestState.PREEMPTED):
            self.waiting.discard(r)
            self._release_pending(r)
        session = self.session_of.pop(r.request_id, None)
        completed = reason in (FinishReason.STOP, FinishReason.LENGTH)
        if session is not None:
            self.sessions.end_turn(
                session,
                self.kv.retainable_blocks(r) if completed else [],
                r.num_tokens,
                self._meta(r, active=True),
                now_s,
                self.executor.prefill_time_s(r.num_tokens),
                completed,
            )
            self._note_evicted(self.sessions.evict_overflow(session.tenant, now_s), "overflow", now_s)
        if self.policy.compressor is not None:
            self.policy.compressor.forget(r.request_id)
        self.executor.forget(r.request_id)
        num_blocks = len(r.block_ids)
        self.kv.free(r, now_s, self._meta(r))
        r.state, r.finish_reason, r.finish_s, r.finish_detail = RequestState.FINISHED, reason, now_s, detail
        tenant = self.tenants[r.tenant]
        tenant.active_seqs -= 1
        tenant.reserved_tokens -= r.reserved_tokens
        tenant.reserved_blocks -= r.estimated_blocks
        tenant.gpu_time_s += r.gpu_time_s
        del self.requests[r.request_id]
        ev = self.events.emit_for
        latency = None if r.cancel_received_s is None else now_s - r.cancel_received_s
        if num_blocks or r.cancel_received_s is not None:
            ev(now_s, EventKind.BLOCKS_RELEASED, r, num_blocks=num_blocks, latency_s=latency, reason=reason.value)
        ev(
            now_s,
            EventKind.FINISHED,
            r,
            num_tokens=r.num_output_tokens,
            latency_s=now_s - r.arrival_s,
            reason=reason.value,
        )

    def _release_pending(self, r: Request) -> None:
        self.pending_blocks -= r.pending_blocks
        r.pending_blocks = 0
        self._promised.pop(r.request_id, None)

    def next_timer_s(self) -> float | None:
        """The next time something changes without an arrival or a step: a queue deadline or an
        idle session's expiry. A driver on a virtual clock jumps there when the engine is idle."""
        times = [t for t in (self.waiting.next_deadline_s(), self.sessions.next_expiry_s()) if t is not None]
        if self.loads:
            times.append(min(load.ready_s for load in self.loads.values()))
        return min(times) if times else None

    # -------------------------------------------------------------- schedule
    def schedule(self, now_s: float, stop_s: float | None = None) -> StepPlan:
        """The next step. With `stop_s` (replay: the next arrival, or the end of the samples one
        call answers), the plan also says how many steps it holds for (`_num_steps_held`), none
        of them starting at or after `stop_s` or a timer of the engine's own."""
        plan = StepPlan(start_s=now_s)
        if self._compactions:
            plan.compactions = self._take_compactions()
        self._housekeeping(now_s)
        if self.loads:
            self._finish_loads(now_s)
        preempted = self._relieve_pressure(now_s, plan)
        budget = self.token_budget
        scheduled: set[str] = set()
        running = self.running
        # decodes first (one token each; max_num_seqs <= the budget, so all fit), then prefill
        # chunks in the order they started: a long prompt never stalls the streams already running
        prefills: list[Request] = []
        loads = self.loads
        for r in list(running.values()):  # a copy: preemption edits `running`
            if r.request_id not in running:
                continue
            n = r.num_prompt_tokens + len(r.output_token_ids) - r.num_computed_tokens
            if n > 1:
                if r.request_id not in loads:  # a request waiting for its load runs nothing
                    prefills.append(r)
            elif n == 1:
                if self._schedule_chunk(r, 1, now_s, scheduled, plan):
                    budget -= 1
                else:
                    preempted = True
        remaining = [r.num_prompt_tokens + len(r.output_token_ids) - r.num_computed_tokens for r in prefills]
        for r, n in zip(prefills, self.prefill_chunks(remaining, budget)):
            if n <= 0 or r.request_id not in running:
                continue
            if self._schedule_chunk(r, n, now_s, scheduled, plan):
                budget -= n
            else:
                preempted = True
        if preempted:
            return plan
        num_running_chunks, num_running, budget_left = len(plan.chunks), len(running), budget
        budget = self._swap_in(now_s, plan, budget)
        self._start_waiting(now_s, plan, budget)
        started = len(plan.chunks) != num_running_chunks or len(running) != num_running  # a load starts no chunk
        if stop_s is not None and not started and not (plan.swap_in or self.swapped):
            plan.num_steps = self._num_steps_held(plan, budget_left)
            if plan.num_steps > 1:
                timer = self.next_timer_s()
                plan.stop_s = stop_s if timer is None else min(stop_s, timer)
        return plan

    def _num_steps_held(self, plan: StepPlan, budget_left: int) -> int:
        """How many steps `plan` (nothing started, preempted or swapped; `budget_left` tokens of
        the budget unused) holds for: the least that each rule's owner says its decision holds.

        The rules, in the order they are cheap to ask: the executor (how many steps it runs per
        plan); each running request (a decode until it finishes, a one-token prompt remainder for
        the step that samples its first token, a prefill while its chunk stays the same: up to the
        step that completes its prompt exactly, since the chunks `prefill_chunks` gives keep
        their order and size while no remainder binds); the compressor (up to the step it next
        compacts a request in); the waiting queue (no request can start); the watermarks (usage
        stays on its rung, below the evict rung where every step acts) and the pool (the blocks
        later steps add come from what it can give without taking anyone's; the free buffer's
        evictions at their starts are `_apply_later_steps`'s). The timers (queue deadlines, idle
        sessions) and the caller's stop time go in `StepPlan.stop_s`."""
        k = self.executor.max_steps_per_plan
        max_ctx, prefilling, compressor = self.admission.max_context_tokens, self.prefilling, self.policy.compressor
        for chunk in plan.chunks:
            if k <= 1:
                return 1
            r, n = chunk.request, chunk.num_new_tokens
            left = r.num_prompt_tokens + len(r.output_token_ids) - r.num_computed_tokens
            if n == 1 and left == 1:
                if r.request_id in prefilling:  # its first token (or the recompute's) comes in this step
                    return 1
                finishes_in = min(r.output_limit - len(r.output_token_ids), max_ctx - r.num_tokens)
                # a compressor learns from every step but the one `r` finishes in: end before it
                k = min(k, finishes_in - 1 if compressor is not None and finishes_in > 1 else finishes_in)
            else:
                k = min(k, left // n)
            if compressor is not None:
                rule = compressor.compaction_rule(r, self.kv.shared_prefix_tokens(r))
                if rule is None:
                    return 1
                compaction = rule.next_compaction(r.num_kv_tokens, r.num_computed_tokens, n, k)
                if compaction is not None:
                    k = compaction[0]
        if k <= 1 or not self._waiting_stay_waiting(budget_left):
            return 1
        live = self.live_blocks
        if self.marks.level(live) != self.level or self._at_evict_rung():
            return 1
        limit = min(self.pool.num_allocatable, self.marks.room_below_next_rung(live))
        if self._later_growth(plan, k) <= limit:
            return k
        lo, hi = 1, k  # growth(lo) fits (none), growth(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self._later_growth(plan, mid) <= limit else (lo, mid)
        return lo

    def _later_growth(self, plan: StepPlan, num_steps: int) -> int:
        """Blocks the steps after the first of `plan` add in its first `num_steps` steps (the
        first step's are allocated)."""
        needed = self.kv.new_blocks_needed
        return sum(needed(c.request, num_steps * c.num_new_tokens) for c in plan.chunks)

    def _waiting_stay_waiting(self, budget_left: int) -> bool:
        """Whether no waiting request can start in steps that leave `budget_left` tokens: none
        is tried (nothing waits, every sequence slot is taken, no budget is left: the head of
        the queue goes back untouched), or each is over its class limit, checked against a
        projected usage that cannot fall while only running requests grow."""
        if not len(self.waiting) or len(self.running) >= self.max_num_seqs or budget_left <= 0:
            return True
        if not self.admission.enabled:
            return False  # then only the pool decides, and its free blocks change every step
        projected = self.projected_blocks()
        return all(self._over_class_limit(r, projected) for r in self.waiting)

    def _over_class_limit(self, r: Request, projected_blocks: int) -> bool:
        """Admission's rule for starting `r`: its estimate on top of the projected usage (less
        what is already promised to it) must fit its class limit."""
        return projected_blocks - r.pending_blocks + r.estimated_blocks > self.admission.class_limit(r)

    def _schedule_chunk(self, r: Request, n: int, now_s: float, scheduled: set[str], plan: StepPlan) -> bool:
        """Give running `r` `n` tokens in this step, growing its blocks when they are full; False
        if `r` itself was preempted or failed instead."""
        # the common decode case has room in its last block: no allocation at all
        if r.num_computed_tokens - r.num_dropped_tokens + n > len(r.block_ids) * self.kv.block_tokens:
            if not self._grow(r, n, now_s, scheduled, plan):
                return False
        plan.chunks.append(ScheduledChunk(r, n))
        scheduled.add(r.request_id)
        return True

    def prefill_limits(self, num_prefills: int, budget: int) -> tuple[int, int]:
        """The largest chunk a running prefill may take this step, and the budget kept for
        requests waiting to start, with `num_prefills` prefills running and `budget` tokens left
        after the decodes.

        Long prefills yield part of the budget to requests waiting to start and to each other:
        while requests wait or several prefills run, each chunk is capped, and several running
        prefills together leave one chunk's worth for the waiting (at most half of what the
        decodes left, so running prefills always progress too). Capping each chunk alone is not
        enough: a few long prompts in flight at once (a batch job, a 6K-token prompt, a cancelled
        4K one) would still take the whole budget, step after step, and a short interactive
        request would wait for all of them to finish. Served strictly in the order they started,
        a chat's 400 remaining prompt tokens waited behind a 30K-token prompt that started a step
        earlier: seconds to its first token with the pool nearly empty."""
        cap = self.long_prefill_cap
        if not cap or not (len(self.waiting) or num_prefills > 1):
            return self.token_budget, 0
        return cap, (min(cap, budget // 2) if len(self.waiting) and num_prefills > 1 else 0)

    def prefill_chunks(self, remaining: Sequence[int], budget: int) -> list[int]:
        """The chunk `schedule()` gives each running prefill (in running order, with `remaining`
        tokens each and `budget` left after the decodes) when nothing is preempted.

        Shortest remaining prompt first: each takes up to the cap in that order, and while nobody
        waits to start, what the caps leave goes to them in the same order (no step idles
        budget). A burst of prompts that arrive together (a trace's coarse timestamps, a
        tenant's batch) otherwise serves its chat-sized members after the 20K-token ones that
        happened to start first, seconds later (vLLM lets short prompts jump long partial
        prefills for the same reason). The order is stable between steps: the prefill served
        first gets the most and stays the shortest until it completes, so the chunks stay the
        same while no remainder binds (a plan holds for those steps)."""
        cap, keep = self.prefill_limits(len(remaining), budget)
        avail = max(0, budget - keep)
        order = sorted(range(len(remaining)), key=remaining.__getitem__)
        chunks = [0] * len(remaining)
        for i in order:
            chunks[i] = c = min(remaining[i], cap, avail)
            avail -= c
        if avail and not len(self.waiting):
            for i in order:
                extra = min(remaining[i] - chunks[i], avail)
                chunks[i] += extra
                avail -= extra
        return chunks

    def _housekeeping(self, now_s: float) -> None:
        for r in self.waiting.expired(now_s):
            self.events.emit_for(
                now_s,
                EventKind.REJECTED,
                r,
                reason="queue_deadline",
                client_request_id=r.client_request_id,
            )
            self.finish(r, FinishReason.REJECTED, now_s, detail="queue_deadline")
        for s in self.sessions.expire_idle(now_s):
            self.events.emit(
                now_s,
                EventKind.EXPIRED,
                tenant=s.tenant.name,
                num_blocks=None,
                reason="idle_timeout",
                request_id=s.session_id,
            )

    def _keep_free_buffer(self, now_s: float) -> None:
        """The policy's free buffer, at a step's start: while fewer blocks than it are free,
        cached blocks go ahead of demand, in the blocks index's order (live state never does)."""
        short = self.policy.free_buffer_blocks - self.pool.num_free
        if short > 0 and self.pool.num_cached:
            self.num_buffer_evicted_blocks += self.pool.evict_cached(short, now_s)

    def _at_evict_rung(self) -> bool:
        """At or above the evict rung, where a step's start may act (evict, preempt)."""
        return self.policy.watermarks and self.live_blocks >= self.marks.evict

    def _relieve_pressure(self, now_s: float, plan: StepPlan) -> bool:
        if not self.policy.watermarks:
            return False
        self._keep_free_buffer(now_s)
        if self._at_evict_rung() and now_s >= self._next_session_tick_s:
            policy = self.policy
            self._next_session_tick_s = now_s + policy.session_tick_s
            excess = self.live_blocks - self.marks.evict + 1
            cap = policy.max_session_evict_blocks_per_tick
            self.evict_sessions(excess if cap is None else min(excess, cap), now_s, "watermark", strict=cap is not None)
        preempted = False
        while self.policy.preemption and self.live_blocks >= self.marks.preempt:
            # the service is at risk: idle state goes first, whatever the policy's pace
            if self.reclaimable_blocks() and self.evict_sessions(
                self.live_blocks - self.marks.preempt + 1, now_s, "capacity"
            ):
                continue
            victim = self._pick_victim(self.running.values(), now_s)
            if victim is None:
                break
            self._preempt(victim, now_s, plan, "watermark")
            preempted = True
        return preempted

    def evict_sessions(
        self, num_blocks: int, now_s: float, reason: str, tenant=None, *, strict: bool = False, keep: str | None = None
    ) -> int:
        before = self.live_blocks
        self._note_evicted(
            self.sessions.evict(
                num_blocks, now_s, self.config.kv_cache.evict_low_priority_first, tenant, strict=strict, keep=keep
            ),
            reason,
            now_s,
        )
        return before - self.live_blocks

    def _note_evicted(self, evicted: list[tuple[Session, int]], reason: str, now_s: float) -> None:
        """An `evicted` event (reason, mode = policy name) and the per-reason counters."""
        for s, num_blocks in evicted:
            self.num_evicted_sessions[reason] = self.num_evicted_sessions.get(reason, 0) + 1
            self.num_evicted_session_blocks[reason] = self.num_evicted_session_blocks.get(reason, 0) + num_blocks
            self.events.emit(
                now_s,
                EventKind.EVICTED,
                request_id=s.session_id,
                tenant=s.tenant.name,
                num_blocks=num_blocks,
                reason=reason,
                mode=self.policy.name,
            )

    def _grow(self, r: Request, n: int, now_s: float, scheduled: set[str], plan: StepPlan) -> bool:
        """Allocate for `n` more tokens of running `r`, reclaiming or preempting as needed.
        False if `r` itself was preempted or failed."""
        while not self.kv.allocate(r, n, now_s):
            short = self.kv.new_blocks_needed(r, n) - self.pool.num_allocatable
            if self.reclaimable_blocks() and self.evict_sessions(short, now_s, "capacity"):
                continue
            if not self.policy.preemption:
                self._oom(r, now_s, self.kv.new_blocks_needed(r, n))
                return False
            victim = self._pick_victim((x for x in self.running.values() if x.request_id not in scheduled), now_s)
            if victim is None:
                self._oom(r, now_s, self.kv.new_blocks_needed(r, n))
                return False
            self._preempt(victim, now_s, plan, "capacity")
            if victim is r:
                return False
        return True

    def _oom(self, r: Request, now_s: float, num_blocks: int) -> None:
        self.num_oom += 1
        self.events.emit(
            now_s,
            EventKind.OOM,
            request_id=r.request_id,
            tenant=r.tenant,
            num_blocks=num_blocks,
            reason="allocation_failed",
        )
        victims = list(self.running.values()) if self.policy.oom_fails_batch else [r]
        for v in victims:
            self.finish(v, FinishReason.OOM, now_s, detail="out of KV memory")

    def _pick_victim(self, candidates: Iterable[Request], now_s: float) -> Request | None:
        return pick_victim(
            candidates,
            self.policy.victim_order,
            self.preempt_cfg.max_consecutive_preemptions,
            now_s,
            self.preempt_cfg.aging_s,
            self.pool.num_blocks,
            lambda r: self.executor.prefill_time_s(r.num_kv_tokens),
        )

    def _preempt(self, r: Request, now_s: float, plan: StepPlan, reason: str) -> None:
        kv_bytes = len(r.block_ids) * self.plan.bytes_per_block
        mode = choose_mode(
            self.preemption_mode,
            kv_bytes,
            self.host.can_hold(kv_bytes),
            self.executor.transfer_time_s(kv_bytes),
            self.executor.prefill_time_s(r.num_kv_tokens),
        )
        if r.approximate and mode is not PreemptionKind.KILL:
            mode = PreemptionKind.SWAP if self.host.can_hold(kv_bytes) else PreemptionKind.RECOMPUTE
        if self.loads.pop(r.request_id, None) is not None and mode is PreemptionKind.SWAP:
            mode = PreemptionKind.RECOMPUTE  # its loaded blocks have not arrived: nothing to swap
        num_blocks = len(r.block_ids)
        r.num_preemptions += 1
        r.consecutive_preemptions += 1
        self.num_preemptions[mode] += 1
        discarded = r.num_computed_tokens if mode is PreemptionKind.RECOMPUTE else 0  # computed again on resume
        self.events.emit_for(
            now_s, EventKind.PREEMPTED, r, mode=mode.value, num_blocks=num_blocks, num_tokens=discarded, reason=reason
        )
        if mode is PreemptionKind.KILL:  # finish() takes it out of the running set and frees it
            self.finish(r, FinishReason.PREEMPTED, now_s, detail="killed to free KV memory")
            return
        del self.running[r.request_id]
        self.prefilling.pop(r.request_id, None)
        if mode is PreemptionKind.SWAP:
            plan.swap_out.append(BlockCopy(r, list(r.block_ids), kv_bytes))
            self.host.store(kv_bytes)
            r.swapped_bytes = kv_bytes
            r.num_swapped_blocks = num_blocks
            self.kv.free(r, now_s, self._meta(r))
            r.state = RequestState.SWAPPED
            self.swapped[r.request_id] = r
            self.events.emit_for(now_s, EventKind.SWAPPED, r, num_blocks=num_blocks, num_bytes=kv_bytes)
        else:
            r.recompute_tokens += discarded
            self.recompute_tokens += discarded
            self.kv.free(r, now_s, self._meta(r, active=True))  # it comes back for these prefix blocks
            r.num_computed_tokens = 0
            r.num_dropped_tokens = 0
            r.kept_positions = None
            if self.policy.compressor is not None:
                self.policy.compressor.forget(r.request_id)
            # Back in the queue in its arrival order (it ranks by its whole wait), but it blocks
            # the requests behind it only once it has waited aging_s again: right after a peak's
            # preemption it cannot fit, and the chats behind it can and leave quickly.
            r.state, r.queued_s = RequestState.PREEMPTED, now_s
            self.waiting.push(r)
        self.events.emit_for(now_s, EventKind.BLOCKS_RELEASED, r, num_blocks=num_blocks, reason="preempted")

    def _swap_in(self, now_s: float, plan: StepPlan, budget: int) -> int:
        for r in list(self.swapped.values()):
            if budget <= 0 or len(self.running) >= self.max_num_seqs:
                break
            need = r.num_swapped_blocks
            if self.policy.watermarks and self.live_blocks + need >= self.marks.pause_batch:
                break
            if not self.kv.swap_in(r, need, now_s):
                break
            self.host.load(r.swapped_bytes)
            plan.swap_in.append(BlockCopy(r, list(r.block_ids), r.swapped_bytes))
            del self.swapped[r.request_id]
            r.num_swapped_blocks = 0
            r.state = RequestState.RUNNING
            self.running[r.request_id] = r
            self.events.emit_for(
                now_s,
                EventKind.RESUMED,
                r,
                mode=PreemptionKind.SWAP.value,
            )
            n = min(r.num_tokens - r.num_computed_tokens, budget)
            if n > 0 and self.kv.allocate(r, n, now_s):
                plan.chunks.append(ScheduledChunk(r, n))
                budget -= n
        return budget

    def _start_waiting(self, now_s: float, plan: StepPlan, budget: int) -> None:
        skip: frozenset[TrafficClass] = frozenset()
        if self.policy.watermarks and self.live_blocks >= self.marks.pause_batch:
            skip = frozenset({TrafficClass.BATCH})
        batch_waiting = self.waiting.num_by_class[TrafficClass.BATCH] > 0 and not skip
        reserved_for_batch = int(self.token_budget * self.preempt_cfg.min_batch_token_share) if batch_waiting else 0
        budget, reserved_for_batch = self._start_in_order(now_s, plan, budget, skip, reserved_for_batch)
        if reserved_for_batch and budget > 0:
            # The batch share is batch's even when more higher-priority requests wait than one
            # step tries (_MAX_SKIPS_PER_STEP): in priority order the batch head would never be
            # reached, and a steady interactive queue would starve batch whatever the share says.
            self._start_in_order(now_s, plan, budget, _ALL_BUT_BATCH, 0)
        # A promise holds for one chance to start. One admitted request that could not take it
        # (batch paused or held out of the interactive reserve, usage grown past its class limit,
        # no budget or slot left) now waits like a queued one: a batch job held back for the
        # length of a peak must not keep blocks promised that the chats need.
        for r in list(self._promised.values()):
            self._release_pending(r)

    def _start_in_order(
        self, now_s: float, plan: StepPlan, budget: int, skip: frozenset[TrafficClass], reserved_for_batch: int
    ) -> tuple[int, int]:
        """Start waiting requests best-first within `budget`, keeping `reserved_for_batch` of it
        for batch until a batch request starts. Returns what is left of both."""
        put_back: list[Request] = []
        for r in self.waiting.drain_in_order(now_s, skip):
            room = budget - (reserved_for_batch if r.traffic_class is not TrafficClass.BATCH else 0)
            if budget <= 0 or len(self.running) >= self.max_num_seqs or len(put_back) >= _MAX_SKIPS_PER_STEP:
                put_back.append(r)
                break
            num_chunks = len(plan.chunks)
            if room <= 0 or self._would_start_on_scraps(r, room) or not self._try_start(r, now_s, plan, room):
                put_back.append(r)
                if now_s - r.queued_s >= self.preempt_cfg.aging_s and not self._held_below_hard_limit(r):
                    break  # it has waited long enough: nothing behind it may overtake it now
                continue
            if len(plan.chunks) > num_chunks:  # not when it waits for a load from a lower tier
                budget -= plan.chunks[-1].num_new_tokens
            if r.traffic_class is TrafficClass.BATCH:
                reserved_for_batch = 0
        for r in put_back:
            self.waiting.push(r)
        return budget, reserved_for_batch

    def _held_below_hard_limit(self, r: Request) -> bool:
        """Whether `r` may only use the pool up to a lower limit than the hard watermark (batch:
        never the interactive reserve; long requests: the admission rung). Such a request waits
        for usage to fall below its own limit, and holding back the requests that may use the
        band above it would not bring that about: it would only idle the band and stall chats
        behind a batch job for as long as the peak lasts. So it never blocks the queue, however
        long it has waited; the batch share of the budget and its queue deadline bound its wait."""
        return self.admission.enabled and self.admission.class_limit(r) < self.marks.preempt

    def _would_start_on_scraps(self, r: Request, room: int) -> bool:
        """A chat-sized prompt (one capped chunk, at most half the budget) starts whole or waits
        a step: started on a step's last scraps, its rest would run as a prefill behind every
        long one already running, which takes the whole budget once nobody waits. Batch starts
        on whatever it gets: its share of the budget is such a slice by design."""
        if r.traffic_class is TrafficClass.BATCH:
            return False
        left = r.num_tokens - r.num_computed_tokens
        return room < left <= min(self.long_prefill_cap or self.token_budget, self.token_budget // 2)

    def _try_start(self, r: Request, now_s: float, plan: StepPlan, budget: int) -> bool:
        if self.admission.enabled and self._over_class_limit(r, self.projected_blocks()):
            return False
        hits = self.kv.take_prefix_hits(r, now_s) if r.num_computed_tokens == 0 and not r.block_ids else 0
        loading = self.tiers is not None and self._start_load(r, now_s)
        n = min(r.num_tokens - r.num_computed_tokens, budget)
        while not loading and not self.kv.allocate(r, n, now_s):
            short = self.kv.new_blocks_needed(r, n) - self.pool.num_allocatable
            if not (self.reclaimable_blocks() and self.evict_sessions(short, now_s, "capacity")):
                self.kv.free(r, now_s, self._meta(r))
                r.num_computed_tokens = 0
                if not self.running and not self.policy.preemption:
                    self._oom(r, now_s, self.kv.new_blocks_needed(r, n))
                return False
        self._release_pending(r)
        first_start = r.first_scheduled_s is None
        if first_start:
            r.first_scheduled_s = now_s
            r.num_prefix_hit_tokens = hits
        self.prefilling[r.request_id] = r
        if r.state is RequestState.PREEMPTED:
            r.state = RequestState.RECOMPUTING
            self.events.emit_for(now_s, EventKind.RESUMED, r, mode=PreemptionKind.RECOMPUTE.value, num_tokens=hits)
        else:
            r.state = RequestState.RUNNING
            self.events.emit_for(now_s, EventKind.SCHEDULED, r, num_tokens=hits)
        self.running[r.request_id] = r
        if not loading:
            plan.chunks.append(ScheduledChunk(r, n))
        return True

    # ------------------------------------------------------------ tier loads
    def _start_load(self, r: Request, now_s: float) -> bool:
        """Continue `r`'s prefix match (GPU hits taken) into the tiers below; when blocks are found
        and loading them ends before re-prefilling them would, give them fresh GPU blocks and start
        the load: `r` then runs nothing until it ends (`_finish_loads`). A first start and a
        recompute's restart after preemption alike: what the pool demoted of its prefix meanwhile
        comes back by the same rule."""
        tiers, kv, bt = self.tiers, self.kv, self.kv.block_tokens
        assert tiers is not None
        if not kv.prefix_cache or r.approximate or r.num_computed_tokens != len(r.block_ids) * bt:
            return False
        first = len(r.block_ids)
        keys = r.block_hashes[first : (r.num_tokens - 1) // bt]
        sources = tiers.match(keys) if keys else []
        if not sources:
            return False
        found, n = sources, self._loadable(r, sources, now_s)
        if n and kv.allocate(r, n * bt, now_s):
            # The allocation's evictions may have pushed a found block down a tier, or out of
            # them all: the load reads each block where it is now (the one place an executor
            # finds it), if that is still worth it.
            sources = tiers.locate(keys[:n])
            n = self._loadable(r, sources, now_s)
            kv.truncate(r, first + n, now_s, self._meta(r))
        elif n:
            return False  # no room for the blocks: the request waits, as any that does not fit
        if n < len(found):  # the rest (or all) is recomputed: loading it would be slower
            tiers.count_slower(found[n:])
            load_s = tiers.price_load(found, now_s) - now_s
            self._emit_load(r, now_s, found[n:], load_s, "slower_than_prefill")
        if not n:
            return False
        keys, sources = keys[:n], sources[:n]
        load = tiers.start_load(r.request_id, keys, sources, r.block_ids[first:], first, now_s)
        r.num_computed_tokens = len(r.block_ids) * bt
        self.loads[r.request_id] = load
        return True

    def _loadable(self, r: Request, sources: list[Tier], now_s: float) -> int:
        """How many leading blocks found below are worth loading: all, else those before the
        first on disk. The tiers' links run in parallel, so a prefix whose tail went down to a
        slow disk can take longer to load than to re-prefill while its head, still in host
        memory, loads in a fraction of that; 0 when neither is worth it."""
        tiers, bt = self.tiers, self.kv.block_tokens
        assert tiers is not None
        head = sources.index(Tier.DISK) if Tier.DISK in sources else len(sources)
        for n in dict.fromkeys((len(sources), head)):
            if not n:
                continue
            load_s = tiers.price_load(sources[:n], now_s) - now_s
            if tiers.worth_loading(load_s, self.executor.prefill_time_s(n * bt, r.num_computed_tokens)):
                return n
        return 0

    def _finish_loads(self, now_s: float) -> None:
        """Loads that ended by `now_s`: their blocks join the prefix cache, or, when the load
        failed, are freed and their tokens computed again."""
        tiers = self.tiers
        assert tiers is not None
        for rid, load in [(rid, load) for rid, load in self.loads.items() if load.ready_s <= now_s]:
            del self.loads[rid]
            r = self.requests[rid]
            outcome = tiers.finish_load(load)
            if outcome == "failed":
                self.kv.truncate(r, load.first_block, now_s, self._meta(r))
            else:
                self.kv.register_full_blocks(r)
                if r.state is not RequestState.RECOMPUTING:  # the prompt's cached tokens: its first start's
                    r.num_prefix_hit_tokens += len(load.keys) * self.kv.block_tokens
            self._emit_load(r, now_s, load.sources, load.ready_s - load.start_s, outcome)

    def _emit_load(self, r: Request, now_s: float, sources: list[Tier], load_s: float, reason: str) -> None:
        """One `tier_load` event per source tier of `sources` (one per block): blocks, tokens,
        bytes, load time, outcome."""
        for tier in sorted(set(sources), key=lambda t: t.value, reverse=True):
            n = sources.count(tier)
            self.events.emit_for(
                now_s,
                EventKind.TIER_LOAD,
                r,
                mode=tier.value,
                num_blocks=n,
                num_tokens=n * self.kv.block_tokens,
                num_bytes=int(n * self.plan.bytes_per_block),
                latency_s=load_s,
                reason=reason,
            )

    # ---------------------------------------------------------------- update
    def update(
        self,
        plan: StepPlan,
        outcome: StepOutcome,
        boundaries_s: Sequence[float],
        observe_at: Collection[int] = (),
        observe: Callable[[int], None] | None = None,
    ) -> list[RequestOutput]:
        """Apply the `outcome.num_steps` steps `plan` ran, which started at `boundaries_s[:-1]`
        and ended at `boundaries_s[-1]`: the blocks steps after the first grow into, at each
        step's start, then every request's tokens. Nothing but the last step can finish a
        request, sample a prompt's first token or compact one (`_num_steps_held`), so the
        steps before it change counters and blocks only. `observe(j)` is called at each inner
        boundary j in `observe_at` (0 < j < num_steps) with the engine as stepping one by one
        leaves it there: the blocks of steps 0..j-1 allocated, their tokens computed."""
        num_steps, t_end_s = outcome.num_steps, boundaries_s[-1]
        if outcome.failed_promotions:
            for load in self.loads.values():  # known failed now; recomputed when the load ends
                load.failed = load.failed or not outcome.failed_promotions.isdisjoint(load.keys)
        done = 0  # steps whose tokens are applied
        if num_steps > 1:
            done = self._apply_later_steps(plan, boundaries_s, observe_at, observe)
        outputs: list[RequestOutput] = []
        gpu_s_per_token = outcome.duration_s / max(1, plan.num_tokens)
        max_ctx = self.admission.max_context_tokens
        bt = self.kv.block_tokens
        finished = RequestState.FINISHED
        compressor = self.policy.compressor
        attention = outcome.attention or {}
        for chunk, tokens in zip(plan.chunks, outcome.sampled):
            r = chunk.request
            if r.state is finished:
                continue
            n = chunk.num_new_tokens
            r.num_computed_tokens += n * (num_steps - done)
            r.gpu_time_s += gpu_s_per_token * n
            r.last_step_s = t_end_s
            if not tokens:
                if r.num_computed_tokens // bt > r.num_registered_blocks and not r.approximate:  # a block filled up
                    self.kv.register_full_blocks(r)
                if compressor is not None:
                    self._compress(compressor, r, attention.get(r.request_id), t_end_s, num_steps)
                continue
            out = self._apply_sampled(r, tokens, t_end_s, max_ctx)
            outputs.append(out)
            if not out.finished and compressor is not None:
                self._compress(compressor, r, attention.get(r.request_id), t_end_s, num_steps)
        return outputs

    def _publish_in_step_order(self, plan: StepPlan, num_steps: int) -> dict[int, list[tuple[Request, int]]]:
        """The prompt blocks a plan's steps before its last fill, when the order they are
        published in can matter, as {steps run: [(request, the tokens its full publishable
        blocks hold then)]} in plan order; else {} (they are published at the plan's end).

        A block is published (its hash registered) only if no block holds that content yet, and
        stepping one by one publishes each step's full blocks at its end, between the steps'
        allocations, which may evict a cached block holding the same content. So the order
        matters when a block to publish holds content the pool knows already, or two requests
        publish the same content; otherwise every block is published whenever it is asked."""
        kv, bt = self.kv, self.kv.block_tokens
        if not kv.prefix_cache:
            return {}
        publishing: list[tuple[Request, int, int]] = []  # (request, chunk, blocks full before the last step)
        seen: set[int] = set()
        order_matters = False
        for chunk in plan.chunks:
            r, n = chunk.request, chunk.num_new_tokens
            if r.approximate:
                continue
            # blocks of tokens known now: given hashes, or the token ids so far (what the plan
            # samples joins at its end, and blocks of it publish there)
            limit = len(r.block_hashes) if r.prompt_token_ids is None else r.num_tokens // bt
            last_full = min((r.num_computed_tokens + (num_steps - 1) * n) // bt, limit)
            if last_full <= r.num_registered_blocks:
                continue  # nothing to publish before the last step (a decode past its prompt)
            kv.update_hashes(r)
            hashes = r.block_hashes[r.num_registered_blocks : last_full]
            order_matters = order_matters or self.pool.knows_any(hashes) or not seen.isdisjoint(hashes)
            seen.update(hashes)
            publishing.append((r, n, last_full))
        if not order_matters:
            return {}
        filling: dict[int, list[tuple[Request, int]]] = {}
        for r, n, last_full in publishing:
            start, done_full = r.num_computed_tokens, r.num_registered_blocks
            for s in range(1, num_steps):
                full = min((start + s * n) // bt, last_full)
                if full > done_full:
                    filling.setdefault(s, []).append((r, full * bt))
                    done_full = full
        return filling

    def _apply_later_steps(
        self,
        plan: StepPlan,
        boundaries_s: Sequence[float],
        observe_at: Collection[int],
        observe: Callable[[int], None] | None,
    ) -> int:
        """Apply a plan's steps after the first up to its last as stepping one by one does: the
        blocks each grows into at its start, in plan order, for each request whose tokens pass
        its last block (`_num_steps_held` checked that they fit), after the free buffer's
        evictions there (no block becomes cached before the last step ends, so they are the ones
        stepping makes); at each boundary j in `observe_at`, before those, first the tokens of
        the steps before j, then `observe(j)`. Where the order of publishing full prompt blocks
        can matter (`_publish_in_step_order`), the blocks each step fills are published at its
        end, before the next step allocates, as stepping does. Returns the number of steps whose
        tokens it applied (the caller applies the rest and publishes the last step's blocks).

        When the time and the order cannot matter (no free buffer, nothing to publish in order,
        and the pool's evictions do not depend on when it asks or the free stack covers the
        growth), each request's blocks up to the next observed boundary (or the plan's end) come
        in one call: the same blocks leave the free stack and the cached index in the same
        order; only which request gets which fresh block differs, and no rule looks at a block's
        id. Else only the steps where something can happen are visited: those that allocate,
        publish or are observed, and with a free buffer the step after each that allocates.
        O(requests × observed boundaries), or O(allocations + published blocks + observed
        boundaries × chunks)."""
        bt, num_steps, allocate = self.kv.block_tokens, len(boundaries_s) - 1, self.kv.allocate
        observed = sorted(j for j in observe_at if 0 < j < num_steps)
        buffered = self.policy.free_buffer_blocks > 0
        publishing = self._publish_in_step_order(plan, num_steps)
        done = 0  # steps whose tokens are applied

        def observe_after(step: int) -> None:  # the tokens of the steps before `step`, then observe
            nonlocal done
            for chunk in plan.chunks:
                chunk.request.num_computed_tokens += chunk.num_new_tokens * (step - done)
            done = step
            assert observe is not None, "observe_at needs an observer"
            observe(step)

        if not (buffered or publishing) and not (
            self.pool.evictions_depend_on_time and self._later_growth(plan, num_steps) > self.pool.num_free
        ):
            for end in (*observed, num_steps):
                t_s = boundaries_s[done + 1]
                for chunk in plan.chunks:
                    r, tokens = chunk.request, (end - done) * chunk.num_new_tokens
                    if r.num_computed_tokens - r.num_dropped_tokens + tokens > len(r.block_ids) * bt:
                        grown = allocate(r, tokens, t_s)
                        assert grown, "a plan holds only while the pool can give its later steps' blocks"
                if end < num_steps:
                    observe_after(end)
            return done
        growing: dict[int, list[tuple[Request, int]]] = {}  # step (from 0) -> (request, its chunk)
        for chunk in plan.chunks:
            r, n = chunk.request, chunk.num_new_tokens
            held, capacity = r.num_kv_tokens, len(r.block_ids) * bt
            step = (capacity - held) // n  # the first whose tokens pass the last block
            while step < num_steps:
                growing.setdefault(step, []).append((r, n))
                capacity = -(-(held + (step + 1) * n) // bt) * bt
                step = (capacity - held) // n
        # with a free buffer, also the step after each that allocates (the first step's
        # allocations are schedule()'s): the free count falls only when a step allocates
        after = (s for s in (1, *(s + 1 for s in growing)) if s < num_steps) if buffered else ()
        visit_observed = set(observed)
        for step in sorted({*growing, *observed, *after, *publishing}):
            for r, computed in publishing.get(step, ()):
                self.kv.register_full_blocks(r, computed)  # at the end of the step before
            if step in visit_observed:
                observe_after(step)
            t_s = boundaries_s[step]
            if buffered:
                self._keep_free_buffer(t_s)
            for r, n in growing.get(step, ()):
                grown = allocate(r, (step + 1 - done) * n, t_s)
                assert grown, "a plan holds only while the pool can give its later steps' blocks"
        return done

    def _apply_sampled(self, r: Request, tokens: list[int], t_end_s: float, max_ctx: int) -> RequestOutput:
        """`r` computed its tokens and sampled `tokens` in steps ending by `t_end_s` (one per
        step): append them, publish blocks that became full, note a first token, finish `r` if
        it reached its limit."""
        if r.state is RequestState.RECOMPUTING:
            r.state = RequestState.RUNNING
        self.prefilling.pop(r.request_id, None)
        r.output_token_ids.extend(tokens)
        if r.num_computed_tokens // self.kv.block_tokens > r.num_registered_blocks and not r.approximate:
            self.kv.register_full_blocks(r)
        r.consecutive_preemptions = 0
        out = RequestOutput(r, tokens)
        if r.first_token_s is None:
            r.first_token_s = t_end_s
            self.events.emit_for(
                t_end_s,
                EventKind.FIRST_TOKEN,
                r,
                latency_s=t_end_s - r.arrival_s,
            )
        if len(r.output_token_ids) >= r.output_limit or r.num_tokens >= max_ctx:
            stop = r.eos_after is not None and r.num_output_tokens >= r.eos_after
            self.finish(r, FinishReason.STOP if stop else FinishReason.LENGTH, t_end_s)
            out.finished = True
        return out

    def _take_compactions(self) -> list[KVCompaction]:
        """The data moves compactions queued for the next step (its plan applies them), which
        leave the queue."""
        moves, self._compactions = [c for c in self._compactions if not c.request.is_finished], []
        return moves

    def _compress(
        self, compressor: Compressor, r: Request, attention: Attention | None, now_s: float, num_steps: int = 1
    ) -> None:
        """Let the token-level policy drop KV of `r` after the `num_steps` steps of a plan; the
        move goes to the next plan."""
        keep = compressor.plan_keep(r, attention, lambda: self.kv.shared_prefix_tokens(r), num_steps)
        if keep is None:
            return
        before = r.num_kv_tokens
        move, released = self.kv.compact(r, keep, now_s, self._meta(r))
        if move is not None:
            self._compactions.append(move)
        dropped = before - r.num_kv_tokens
        self.approximated_tokens += dropped
        self.events.emit_for(
            now_s,
            EventKind.APPROXIMATED,
            r,
            num_tokens=dropped,
            num_blocks=released,
            mode=self.policy.name,
        )
