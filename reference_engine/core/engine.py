"""EngineCore: the reference engine as a library — add requests, abort them, step, observe.

    core = EngineCore(load_config("configs/default.toml"), clock=VirtualClock())
    core.add_request(tenant="acme", prompt_token_ids=ids, max_new_tokens=128)
    while core.has_work():
        out = core.step()            # schedule, execute, apply; events stamped at out.t_end_s
        clock.advance_to(out.t_end_s)

Live serving splits a step in two so the GPU time can pass for real in between:
`begin_step()` schedules and executes, `end_step()` applies the result at its end time. An
abort that arrives while a step is in flight is *deferred* to `end_step()`: a block is never
freed while the step that reads it is still running.

`step(until_s=...)` (replay) may take several steps in one call: the scheduler's plan says how
many steps it holds for (nothing it decides changes before then: no start, finish, first token,
compaction, rung crossing, timer; `Scheduler._num_steps_held`), the executor runs it that many
times and `update` applies them through the path of a single step, so the results are the ones
stepping one by one gives. No step of it starts at or after `until_s`; the times in `observe_s`
it runs through are answered with a snapshot taken at the first step boundary at or after each,
while `update` applies the steps (the blocks and tokens of the steps before it, nothing else
changing inside a plan).

Pure: time only from the injected clock, no I/O, no globals.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from record.errors import CapacityError, ConfigError, DeviceOutOfMemoryError, InvalidRequestError, RequestError
from record.events import EventKind
from reference_engine.clock import Clock, MonotonicClock
from reference_engine.config import EngineConfig, config_digest
from reference_engine.config.binding import check_binding
from reference_engine.core.admission import AdmissionAction, AdmissionController, AdmissionDecision
from reference_engine.core.block_pool import BlockPool
from reference_engine.core.event_log import EventLog
from reference_engine.core.host_tier import HostTier
from reference_engine.core.kv_events import KvEventLog
from reference_engine.core.kv_manager import KVCacheManager
from reference_engine.core.prefix_hash import BlockHasher
from reference_engine.core.scheduler import RequestOutput, Scheduler
from reference_engine.core.sessions import SessionStore
from reference_engine.core.snapshot import PolicyStats, UsageSnapshot, take_policy_stats, take_snapshot
from reference_engine.core.tenants import TenantRegistry, TenantState
from reference_engine.core.tiers import TieredCache
from reference_engine.core.watermarks import PressureLevel, Watermarks
from reference_engine.executors.base import BlockCopy, Executor, ScheduledChunk, StepOutcome, StepPlan, Tier
from reference_engine.executors.registry import make_executor
from reference_engine.memory import GIB, MemoryPlan
from reference_engine.policies.base import IndexKind
from reference_engine.policies.registry import make_policy
from reference_engine.request import FinishReason, Request
from reference_engine.tokenizer import WordTokenizer, apply_chat_template


@dataclass(slots=True)
class StepOutput:
    t_start_s: float
    t_end_s: float
    outputs: list[RequestOutput] = field(default_factory=list)
    num_steps: int = 0  # 0: nothing to do; >1: one plan run several times
    num_scheduled_tokens: int = 0
    # (observe time, snapshot) for the observe times the steps reached: each snapshot shows the
    # engine at the first step boundary at or after its time
    observations: list[tuple[float, UsageSnapshot]] = field(default_factory=list)

    @property
    def idle(self) -> bool:
        return self.num_steps == 0


@dataclass(slots=True)
class InFlightStep:
    plan: StepPlan
    outcome: StepOutcome
    boundaries_s: list[float]  # each step's start, then the last one's end

    @property
    def t_start_s(self) -> float:
        return self.boundaries_s[0]

    @property
    def t_end_s(self) -> float:
        return self.boundaries_s[-1]


class EngineCore:
    def __init__(
        self,
        config: EngineConfig,
        clock: Clock | None = None,
        executor: Executor | None = None,
        hash_key: bytes | None = None,
    ) -> None:
        """`hash_key`: the secret of the prefix-cache hashes (core/prefix_hash.py); random if None."""
        self.config = config
        self.digest = config_digest(config)
        self.clock = clock or MonotonicClock()
        self.memory = MemoryPlan.from_config(config)
        check_binding(config, self.memory.model_digest)
        self.tokenizer = WordTokenizer()
        self.policy = make_policy(config, self.memory)
        bt = self.memory.block_tokens
        self.marks = Watermarks(config.kv_cache.guard, self.memory.num_blocks)
        if self.policy.watermarks:
            self.marks.check_headroom(-(-config.engine.max_num_batched_tokens // bt) + config.engine.max_num_seqs)
        self.events = EventLog()
        m = config.model
        model_scope = f"{m.name}|{m.tokenizer}|{m.adapter}|{m.chat_template}"
        self.hasher = BlockHasher(bt, model_scope, hash_key, config.prefix_cache.sharing)
        self.tenants = TenantRegistry(config, self.memory.num_blocks, self.hasher.tenant_scope)
        self.pool = BlockPool(self.memory.num_blocks, bt, self.policy.make_index(IndexKind.BLOCKS))
        prefix_cache = config.prefix_cache.enabled and self.policy.prefix_cache
        self.kv = KVCacheManager(self.pool, self.hasher, prefix_cache)
        # What the prefix cache stores and evicts, for whoever publishes it (core/kv_events.py)
        self.kv_events = KvEventLog(bt) if config.kv_events.enable_kv_cache_events and prefix_cache else None
        self.pool.kv_events = self.kv_events
        # References held in this pool by an owner outside the engine's requests (a P/D pair's
        # transfer source and reservation): the orphan check counts them as owned
        self.outside_refs: Callable[[], Iterable[int]] = tuple
        self.sessions = SessionStore(
            self.pool,
            self.policy.make_index,
            config.kv_cache.max_session_idle_seconds,
            config.kv_cache.max_tokens_per_session,
        )
        self.admission = AdmissionController(
            config,
            self.marks,
            bt,
            self.memory.model.max_context_tokens,
            enabled=config.admission.enabled and self.policy.admission,
            tenant_caps=self.policy.tenant_caps,
            max_pool_tokens=self.memory.capacity_tokens if self.policy.preemption else None,
        )
        self.executor = executor or make_executor(config, self.memory)
        self.host = HostTier(config.preemption.host_swap_gib * GIB)
        self.tiers = self._make_tiers()
        self.scheduler = Scheduler(
            config,
            self.memory,
            self.policy,
            self.kv,
            self.sessions,
            self.tenants,
            self.admission,
            self.marks,
            self.events,
            self.executor,
            self.host,
            self.tiers,
        )
        self._ids = itertools.count()
        self._in_flight: InFlightStep | None = None
        self._deferred_aborts: list[str] = []
        self._public_prefixes = self._tokenize_public_prefixes()
        self.num_steps = 0
        self.num_computed_tokens = 0  # KV tokens computed by every step: prefill, decode and recompute
        self.num_rejected: dict[str, int] = {}

    def _make_tiers(self) -> TieredCache | None:
        """The host and disk tiers the config asks for, fed by the pool's evictions; None when
        it asks for neither (or prefix caching is off: there is nothing to keep)."""
        cfg = self.config.tiers
        if not (cfg.host_gib or cfg.disk_gib) or not self.kv.prefix_cache:
            return None
        tiers = TieredCache(
            cfg,
            self.memory.bytes_per_block,
            self.memory.gpu.host_link_gbps * 1e9,
            {t.name: t.config.max_kv_share for t in self.tenants},
        )
        self.pool.on_evict = tiers.demote
        return tiers

    # ---------------------------------------------------------------- intake
    def authenticate(self, api_key: str | None) -> TenantState:
        return self.tenants.authenticate(api_key)

    def add_request(
        self,
        *,
        tenant: str,
        prompt_token_ids: list[int] | None = None,
        num_prompt_tokens: int | None = None,
        prompt_block_hashes: list[int] | None = None,
        max_new_tokens: int | None = None,
        eos_after: int | None = None,
        session_id: str | None = None,
        session_rebuildable: bool = True,
        streaming: bool = False,
        request_id: str | None = None,
        public_prefix_tokens: int | None = None,
        cache_salt: str | None = None,
        client_request_id: str | None = None,
    ) -> Request:
        """Admit, queue or refuse a request. Refusals raise a `RequestError` (400/410/429).

        `request_id` names the request (trusted callers only: the server makes its own ids, the
        router and replay pass theirs); `client_request_id` is the client's own label for it,
        kept beside the id and never used as a key. `public_prefix_tokens` says how many leading
        tokens are a declared public prefix when the caller gives `prompt_block_hashes` instead of
        tokens (replay); by default the engine finds them by matching the config's public
        prefixes against `prompt_token_ids`. A `cache_salt` puts every block of the request in a
        scope of its own (the tenant's and the salt's): it shares only with the same salt (unless
        `prefix_cache.sharing` is global: then salts are ignored)."""
        now = self.clock.now()
        t = self.tenants[tenant]
        t.note_request(now)
        n_prompt = len(prompt_token_ids) if prompt_token_ids is not None else num_prompt_tokens
        if not n_prompt or n_prompt < 1:
            raise RequestError("the prompt is empty: send at least one token", param="prompt")
        rid = request_id or f"req-{next(self._ids)}"
        if rid in self.scheduler.requests:
            raise RequestError(f"request id {rid!r} is already in flight", param="request_id")
        live = self.pool.num_live
        granted, clamped = self.admission.resolve_max_new_tokens(max_new_tokens, live)
        salt = cache_salt if self.hasher.honours_salt else None
        if salt is not None:
            scope, public_prefix_tokens = self.hasher.salted_scope(t.scope, salt), 0
        else:
            scope = t.scope
            if public_prefix_tokens is None:
                public_prefix_tokens = self._public_prefix_len(prompt_token_ids)
        r = Request(
            request_id=rid,
            tenant=t.name,
            traffic_class=t.traffic_class,
            num_prompt_tokens=n_prompt,
            max_new_tokens=granted,
            arrival_s=now,
            prompt_token_ids=prompt_token_ids,
            prompt_block_hashes=prompt_block_hashes,
            eos_after=eos_after,
            session_id=session_id,
            streaming=streaming,
            requested_max_new_tokens=max_new_tokens,
            max_tokens_clamped=clamped,
            public_prefix_tokens=public_prefix_tokens,
            hash_scope=scope,
            tier_scope=self.hasher.tier_scope(self.config.tiers.key_scope, t.scope, salt) if self.tiers else None,
            client_request_id=client_request_id,
        )
        try:
            self.admission.check_context(n_prompt, granted, t)
            session = None
            if session_id is not None:
                session = self.sessions.check(session_id, t, session_rebuildable)
            r.estimated_blocks = self.admission.estimate_blocks(r)
            r.reserved_tokens = r.max_total_tokens
            # a turn that continues its session reuses the blocks it holds: count those once
            session_blocks = (
                self.kv.leading_blocks_in(r, session.blocks) if session is not None and session.is_retained else 0
            )
            decision = self._decide(r, t, session_blocks, session_id)
            if decision.action is AdmissionAction.REJECT:
                raise decision.to_error()
        except RequestError as err:
            self._record_rejection(r, err, now)
            raise
        session = None
        if session_id is not None:
            session, r.session_rebuilt = self.sessions.begin_turn(session_id, t, session_rebuildable, now)
        r.seq_no = next(self._ids)
        r.deadline_s = now + self.config.admission.queue_deadline_for(t.traffic_class) / 1000
        admitted = decision.action is AdmissionAction.ADMIT
        kind = EventKind.ADMITTED if admitted else EventKind.QUEUED
        self.events.emit(
            now,
            kind,
            request_id=rid,
            tenant=t.name,
            traffic_class=t.traffic_class.value,
            num_tokens=n_prompt,
            num_blocks=r.estimated_blocks,
            deadline_s=None if admitted else r.deadline_s,
            client_request_id=client_request_id,
        )
        self.scheduler.add(r, admitted, session)
        return r

    def refuse_early(
        self,
        *,
        tenant: str,
        min_prompt_tokens: int,
        max_new_tokens: int | None,
        request_id: str,
        client_request_id: str | None = None,
    ) -> AdmissionDecision | None:
        """Raise now the refusal `add_request` would give a prompt of at least `min_prompt_tokens`
        tokens, so that a server can refuse a long prompt before it pays for tokenizing it; else
        return what admission would do with it now (admit or queue). A P/D pair asks its decode
        side this before it admits a request, and before it reserves the blocks of its pull.

        Refusal only grows with the prompt's length (a larger estimate never fits where a smaller
        one did not), so a lower bound never refuses what `add_request` would take. A tenant with
        idle sessions is left to `add_request`, which may reclaim them first (None: not told); so
        is a session turn (the caller does not ask), which reuses its session's blocks. A refusal
        is counted and logged as `add_request` counts and logs one; nothing else changes."""
        t = self.tenants[tenant]
        if min_prompt_tokens < 1 or t.retained_blocks:
            return None
        now = self.clock.now()
        granted, clamped = self.admission.resolve_max_new_tokens(max_new_tokens, self.pool.num_live)
        r = Request(
            request_id=request_id,
            tenant=t.name,
            traffic_class=t.traffic_class,
            num_prompt_tokens=min_prompt_tokens,
            max_new_tokens=granted,
            arrival_s=now,
            requested_max_new_tokens=max_new_tokens,
            max_tokens_clamped=clamped,
            hash_scope=t.scope,
            client_request_id=client_request_id,
        )
        try:
            self.admission.check_context(min_prompt_tokens, granted, t)
            r.estimated_blocks = self.admission.estimate_blocks(r)
            decision = self._decide(r, t, 0, None)  # no idle sessions: nothing to reclaim, no side effect
            if decision.action is AdmissionAction.REJECT:
                raise decision.to_error()
        except RequestError as err:
            t.note_request(now)
            self._record_rejection(r, err, now)
            raise
        return decision

    def _decide(self, r: Request, t: TenantState, session_blocks: int, session_id: str | None):
        adm, sched = self.admission, self.scheduler
        quota = adm.check_tenant(r, t, r.estimated_blocks, session_blocks)
        overage = adm.tenant_block_overage(t, r.estimated_blocks, session_blocks)
        if (
            quota is not None
            and overage
            and t.retained_blocks - session_blocks >= overage
            and adm.tenant_slot_limit(r, t) is None
        ):
            # Over its cap with idle sessions of its own, and only the cap stands in the way:
            # reclaim just the overage from those (never another tenant's, never the session this
            # turn continues). A tenant at its max_active_seqs keeps its sessions: evicting them
            # could not admit the request.
            sched.evict_sessions(overage, self.clock.now(), "tenant_quota", tenant=t, keep=session_id)
            quota = adm.check_tenant(r, t, r.estimated_blocks, session_blocks)
        if quota is not None:
            return quota
        return adm.decide(r, r.estimated_blocks, sched.projected_blocks(), self.pool.num_live, len(sched.waiting))

    def _record_rejection(self, r: Request, err: RequestError, now: float) -> None:
        """Count a refusal on arrival and log it with what judging it needs: the tenant's live
        blocks at that moment and, for a tenant_quota, the limit that refused it."""
        self.num_rejected[err.code] = self.num_rejected.get(err.code, 0) + 1
        self.tenants[r.tenant].num_rejected[err.code] = self.tenants[r.tenant].num_rejected.get(err.code, 0) + 1
        self.events.emit_for(
            now,
            EventKind.REJECTED,
            r,
            num_tokens=r.num_prompt_tokens,
            num_blocks=r.estimated_blocks or None,
            reason=err.code,
            tenant_live_blocks=self.pool.live_by_tenant.get(r.tenant, 0),
            mode=err.limit if isinstance(err, CapacityError) else None,
            client_request_id=r.client_request_id,
        )

    def abort(self, request_id: str) -> bool:
        """Cancel a request (client cancel or disconnect). Its blocks are released now, or at the
        end of the step in flight if that step still reads them."""
        r = self.scheduler.requests.get(request_id)
        if r is None:
            return False
        now = self.clock.now()
        if r.cancel_received_s is None:
            r.cancel_received_s = now
            self.events.emit_for(
                now,
                EventKind.CANCEL_RECEIVED,
                r,
            )
        if self._in_flight is not None:
            self._deferred_aborts.append(request_id)
        else:
            self.scheduler.finish(r, FinishReason.CANCELLED, now)
        return True

    # ------------------------------------------------------------------ steps
    def next_timer_s(self) -> float | None:
        """When an idle engine next changes on its own (queue deadline, session expiry)."""
        return self.scheduler.next_timer_s()

    def has_work(self) -> bool:
        s = self.scheduler
        return bool(s.running or len(s.waiting) or s.swapped)

    def begin_step(self, stop_s: float | None = None, start_s: float | None = None) -> InFlightStep | None:
        """Schedule and execute; with `stop_s`, the plan may hold for several steps, none of
        which starts at or after it.

        The step starts now, or at `start_s` (a live loop that woke late passes the previous
        step's modelled end, as a GPU starts its next step when the last one ends), but never
        before the newest logged event: an arrival or a cancel the step may act on was logged
        when it happened, so no step serves a request before it arrived, and the log stays in
        time order."""
        assert self._in_flight is None, "end_step() the step in flight first"
        now = self.clock.now()
        if start_s is not None:
            last_event_s = self.events.last_t_s
            now = start_s if last_event_s is None else max(start_s, last_event_s)
        self.scheduler.level = self.marks.level(self.pool.num_live)
        plan = self.scheduler.schedule(now, stop_s)
        if self.tiers is not None:
            self.tiers.take_moves(plan)
        if plan.is_empty():
            return None
        try:
            outcome = self.executor.execute(plan)
        except DeviceOutOfMemoryError as err:
            self._fail_step_oom(plan, now, str(err))
            return None
        self._in_flight = InFlightStep(plan, outcome, outcome.boundaries_s(now))
        return self._in_flight

    def end_step(self, observe_s: Sequence[float] = ()) -> StepOutput:
        """Apply the step(s) in flight. Each of the (sorted) `observe_s` they reach is answered
        in `StepOutput.observations` with a snapshot of the engine at the first step boundary at
        or after it (after the first step's end), taken there while the steps are applied."""
        step, self._in_flight = self._in_flight, None
        assert step is not None, "no step in flight"
        boundaries_s, num_steps = step.boundaries_s, step.outcome.num_steps
        reached: dict[int, list[float]] = {}  # boundary index (1..num_steps) -> the observe times it answers
        for t in observe_s:
            j = max(1, bisect.bisect_left(boundaries_s, t))
            if j > num_steps:
                break
            reached.setdefault(j, []).append(t)
        snapshots: dict[int, UsageSnapshot] = {}

        def observe(j: int) -> None:
            snapshots[j] = take_snapshot(self, boundaries_s[j])

        outputs = self.scheduler.update(step.plan, step.outcome, boundaries_s, reached.keys(), observe)
        num_tokens = num_steps * step.plan.num_tokens
        self.num_steps += num_steps
        self.num_computed_tokens += num_tokens
        aborts, self._deferred_aborts = self._deferred_aborts, []
        for rid in aborts:
            r = self.scheduler.requests.get(rid)
            if r is not None:  # a live loop may end a step after its modelled end: never release before the cancel
                assert r.cancel_received_s is not None, "abort() stamps the cancel before deferring it"
                self.scheduler.finish(r, FinishReason.CANCELLED, max(step.t_end_s, r.cancel_received_s))
        self._note_level(step.t_end_s)
        if num_steps in reached:
            observe(num_steps)
        observations = [(t, snapshots[j]) for j, times in reached.items() for t in times]
        return StepOutput(step.t_start_s, step.t_end_s, outputs, num_steps, num_tokens, observations)

    def _fail_step_oom(self, plan: StepPlan, now: float, detail: str) -> None:
        """The device ran out of memory mid-step: the step's KV may be half-written, so every
        request in it fails with an `oom` event, as on a real engine (gated: zero OOM)."""
        self.scheduler.num_oom += 1
        work: tuple[ScheduledChunk | BlockCopy, ...] = (*plan.chunks, *plan.swap_out, *plan.swap_in)
        requests = {id(x.request): x.request for x in work}
        self.events.emit(
            now, EventKind.OOM, num_blocks=sum(len(r.block_ids) for r in requests.values()), reason="device_oom"
        )
        for r in requests.values():
            self.scheduler.finish(r, FinishReason.OOM, now, detail)

    def step(self, until_s: float | None = None, observe_s: Sequence[float] = ()) -> StepOutput:
        """One plan: a step, or with `until_s` (replay) the steps the plan holds for, none
        starting at or after `until_s`. The (sorted, future) `observe_s` it reaches are answered
        in `StepOutput.observations` with a snapshot of the engine at the first step boundary at
        or after each, as stepping one by one would see it there (`end_step`)."""
        now = self.clock.now()
        if self.begin_step(until_s) is None:
            return StepOutput(now, now)
        return self.end_step(observe_s)

    def _note_level(self, now: float) -> None:
        level = self.marks.level(self.pool.num_live)
        if level != self.scheduler.level:
            self.events.emit(
                now, EventKind.WATERMARK, reason=level.name.lower(), usage=self.pool.num_live / self.pool.num_blocks
            )
            self.scheduler.level = level

    # --------------------------------------------------------------- warm-up
    def _tokenize_public_prefixes(self) -> list[list[int]]:
        forms = []
        for p in self.config.prefix_cache.public_prefixes:
            forms.append(self.tokenizer.encode(p.text))
            # the same text as a chat system message (without the closing tokens that follow it)
            forms.append(self.tokenizer.encode(apply_chat_template([{"role": "system", "content": p.text}]))[:-1])
        return sorted(forms, key=len, reverse=True)

    def _public_prefix_len(self, token_ids: list[int] | None) -> int:
        if token_ids is None:
            return 0
        for form in self._public_prefixes:
            if len(token_ids) >= len(form) and token_ids[: len(form)] == form:
                return len(form)
        return 0

    def pin_prefixes(self) -> float:
        """Load the config's pinned public prefixes (warm-up). Returns the simulated load time."""
        total_s = 0.0
        cap = int(self.config.kv_cache.pinned_max_percent / 100 * self.pool.num_blocks)
        bt = self.memory.block_tokens
        for p in self.config.prefix_cache.public_prefixes:
            if not p.pinned:
                continue
            ids = self.tokenizer.encode(apply_chat_template([{"role": "system", "content": p.text}]))[:-1]
            n = len(ids) // bt
            if self.scheduler.num_pinned_blocks + n > cap:
                raise ConfigError(
                    f"pinned prefix {p.name!r} ({n} blocks) would pass kv_cache.pinned_max_percent "
                    f"({cap} blocks, {self.scheduler.num_pinned_blocks} already pinned)"
                )
            r = Request(
                request_id=f"pin:{p.name}",
                tenant=next(iter(self.tenants)).name,
                traffic_class=next(iter(self.tenants)).traffic_class,
                num_prompt_tokens=len(ids),
                max_new_tokens=1,
                arrival_s=0.0,
                prompt_token_ids=ids,
                public_prefix_tokens=len(ids),
            )
            if not self.kv.pin(r, n, self.clock.now()):
                raise ConfigError(f"pinned prefix {p.name!r} does not fit in the KV pool")
            self.scheduler.num_pinned_blocks += n
            total_s += self.executor.prefill_time_s(len(ids))
        return total_s

    def offload_prefix_cache(self, tier: Tier) -> dict[str, int]:
        """Push every cached prefix block out of the GPU pool down to `tier`: the pool evicts
        them (demoted to the host tier as any eviction is) and, for the disk, the host tier
        passes its blocks on. What the isolation probes call to find out whether a prefix that
        left the GPU is still scoped (`/admin/tiers/offload`). Blocks held by requests, sessions
        or pins stay. Returns the blocks that left the GPU and the host."""
        if self.tiers is None:
            raise InvalidRequestError(
                "this engine has no KV tiers to offload to: start it with [tiers] host_gib or disk_gib"
            )
        self.tiers.check_tier(tier)
        now = self.clock.now()
        num_gpu = self.pool.evict_cached(self.pool.num_cached, now)
        num_host = self.tiers.push_down(now) if tier is Tier.DISK else 0
        return {"gpu_blocks_offloaded": num_gpu, "host_blocks_offloaded": num_host}

    # ------------------------------------------------------------ observation
    def snapshot(self) -> UsageSnapshot:
        return take_snapshot(self)

    def tier_state(self) -> dict[str, Any]:
        """The KV tiers as a run record keeps them after the drain (`meta.final`): each tier's
        usage and counters, and the loads still in flight; empty without tiers."""
        if self.tiers is None:
            return {}
        return {"tiers": self.tiers.stats(), "tier_loads_in_flight": len(self.scheduler.loads)}

    def policy_stats(self) -> PolicyStats:
        """The counters that compare policies: evictions by reason, hits, re-prefill, approximation."""
        return take_policy_stats(self)

    def get_request(self, request_id: str) -> Request | None:
        return self.scheduler.requests.get(request_id)

    def reconcile(self) -> int:
        """Orphan check: every live reference must belong to a request, a session, a pin or an
        outside owner (`outside_refs`).
        Returns the number of references found without an owner (and released)."""
        from reference_engine.core.ledger import reconcile_orphans

        freed = reconcile_orphans(self)
        if freed:
            self.events.emit(self.clock.now(), EventKind.ORPHAN_RECONCILED, num_blocks=freed)
        return freed

    def close(self) -> None:
        """The engine is done: its executor releases what it holds outside memory (the torch
        executor's disk tier files), now rather than at garbage collection or exit. Callers: the
        server's shutdown and the end of a replay. Idempotent."""
        self.executor.close()

    def fail_all(self, reason: FinishReason, detail: str) -> None:
        for r in list(self.scheduler.requests.values()):
            self.scheduler.finish(r, reason, self.clock.now(), detail)

    @property
    def pressure(self) -> PressureLevel:
        return self.marks.level(self.pool.num_live)
