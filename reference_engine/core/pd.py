"""Disaggregated prefill and decode: two engines and a link, on virtual clocks (docs/pd.md).

    pd = PDCore(load_config("configs/pd.toml"))
    pd.run_until(t)                      # both sides and the link brought to t
    r = pd.add_request(tenant="acme", prompt_token_ids=ids, max_new_tokens=64)
    pd.run_until(math.inf)               # until nothing can change any more
    r.state, r.decode.first_token_s, pd.stranded_blocks()

Each side is a whole `EngineCore` (its pool, watermarks, admission, prefix cache), built from
the config with `[pd] prefill` / `decode` overrides, both keyed alike so a block hashes the same
on either side. A request's life:

    prefilling     the prefill side computes the prompt (max_new_tokens = 1); when it ends, its
                   prompt blocks stay referenced (the source) until the pull is over
    reserving      the decode side reserves the blocks it lacks before pulling (its own prefix
                   hits are held, not pulled), once its own admission would take the request
                   (class limits, tenant caps); while it would queue the request the pull
                   waits (a pull delayed by a decode pool under pressure), and a refusal
                   ends the request with it. A request the decode side would refuse on
                   arrival is refused before its prefill
    transferring   the blocks travel over the link (setup + latency + bytes / bandwidth, one
                   transfer at a time); the source is released when they land
    decoding       the decode side runs the request, its prompt found in the reserved blocks;
                   the reservation is released once the request holds them (scheduled). Its
                   prompt's cached tokens, as the answer reports them, are the prefill side's
                   hits: the blocks it pulled are the transfer's, not the cache's
    finished

A transfer that fails (`failure_rate`) or is not done `transfer_timeout_ms` after the prefill
ended releases both sides and either prefills on the decode side (`local_prefill`) or ends the
request with `error`; an abort in any state releases both sides. Two keys break this on
purpose, for gate truth: `release_reservation_on_abort = false` leaves an aborted request's
decode reservation held for ever (vLLM #46283), `resolve_failed_transfers = false` leaves a
failed transfer holding both sides, its request never ending.

The source and the reservation are references the pair holds in each engine's pool, outside the
engine's own requests: the pair tells each engine's orphan check (`EngineCore.reconcile`, run by
the live server) about them through `outside_refs`, so they are never taken for orphans.

Chaos, changed at run time (the server's POST /admin/pd/chaos, the replay's `PdChaos`):
`failure_rate` (of transfers that fail), `link.slowdown` (every transfer that many times slower),
`cancel_every` (abort every n-th transfer the moment it starts: the cancel timed to the
transfer, which only the engine can time) and `lose_prefill` (the prefill engine dies with what
is on it: its prefills end `worker_lost`, and every transfer not landed loses its source and
fails as a failed transfer does, so the decode side must let its reservations go).

Time, replayed (`run_until`): each side has its own virtual clock; while anything is in flight
the two are brought to the same time every `tick_ms`, and a hand-off (reserve, land, fail)
happens at the tick after its cause, so a transfer starts up to one tick late. Served (a `clock`
given): both sides share that clock, each stepped by its own engine loop, and the server calls
`settle` every `tick_ms` while a hand-off is pending (server/pd_loop.py). Either way the
prefill's end is seen at the step it happens (a plan ends at a request's finish; the server
reads events right after each step), so its blocks are referenced before anything can evict
them. A finished request is forgotten, unless it still holds a reservation (`stranded_blocks`).
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from record.errors import RequestError
from record.events import EventKind
from reference_engine.clock import Clock, VirtualClock
from reference_engine.config import EngineConfig, PdFailure, with_overrides
from reference_engine.core.admission import AdmissionAction
from reference_engine.core.engine import EngineCore
from reference_engine.core.event_log import EventLog
from reference_engine.core.snapshot import UsageSnapshot
from reference_engine.core.stepping import run_until
from reference_engine.request import FinishReason, Request

PREFILL, DECODE = "prefill", "decode"
ROLES = (PREFILL, DECODE)
CLIENT_KINDS = frozenset({EventKind.FIRST_TOKEN, EventKind.REJECTED, EventKind.FINISHED})
"""The pair's own events that tell what a client sees of a request (its first token, its refusal,
its one finish); each side's events tell the same of its part."""


class PdState(str, Enum):
    PREFILLING = "prefilling"
    RESERVING = "reserving"
    TRANSFERRING = "transferring"
    DECODING = "decoding"
    FINISHED = "finished"


@dataclass(eq=False)
class PdRequest:
    """One request across both sides: its state, the two engine requests, and what it holds."""

    request_id: str
    tenant: str
    arrival_s: float
    submit: dict  # add_request's arguments, sent again to the decode side
    prefill: Request
    decode: Request | None = None
    state: PdState = PdState.PREFILLING
    finish_reason: str | None = None
    handoff_s: float | None = None  # the prefill ended
    source_blocks: list[int] = field(default_factory=list)  # prefill-side blocks held for the pull
    held_blocks: list[int] = field(default_factory=list)  # decode-side prefix hits held by the reservation
    reserved_blocks: list[int] = field(default_factory=list)  # decode-side blocks the pull fills
    pull_hashes: list[int] = field(default_factory=list)
    transfer_end_s: float | None = None
    transfer_fails: bool = False
    failure: str | None = None  # why the transfer failed: failed, timeout
    refusal: RequestError | None = None  # the decode side's refusal, as its 4xx tells the client
    fell_back: bool = False
    lost: bool = False  # its prefill engine died under it (chaos)
    hung: bool = False  # a failed transfer nobody resolves (broken target)
    first_token_s: float | None = None  # the decode side's first token: what a client sees
    finish_s: float | None = None

    @property
    def reservation(self) -> list[int]:
        return self.held_blocks + self.reserved_blocks


class KvLink:
    """The link between the pools: one transfer at a time, each paying setup, latency and bytes;
    `slowdown` (chaos) makes each part that many times slower."""

    def __init__(self, gbps: float, latency_s: float, setup_s: float) -> None:
        self.bytes_per_s, self.latency_s, self.setup_s = gbps * 1e9, latency_s, setup_s
        self.slowdown = 1.0
        self.free_at_s = 0.0
        self.bytes_moved = 0.0

    def book(self, now_s: float, num_bytes: float) -> float:
        """Queue a transfer of `num_bytes` at `now_s`; returns when it lands."""
        start = max(now_s, self.free_at_s)
        self.free_at_s = start + (self.setup_s + num_bytes / self.bytes_per_s) * self.slowdown
        self.bytes_moved += num_bytes
        return self.free_at_s + self.latency_s * self.slowdown


class _Side:
    """One engine of the pair, on its own virtual clock or the served pair's clock; tells the pair
    its events (`tell`: after every step, whoever steps it)."""

    def __init__(
        self,
        config: EngineConfig,
        hash_key: bytes,
        on_events: Callable[[str, list], None],
        role: str,
        clock: Clock | None,
    ) -> None:
        self.role = role
        self.clock = clock or VirtualClock()
        self.core = EngineCore(config, clock=self.clock, hash_key=hash_key)
        self._cursor = self.core.events.next_cursor
        self._on_events = on_events

    def advance(self, t_s: float) -> None:
        """Step to `t_s`, telling events after every step (a plan ends where a request finishes)."""
        assert isinstance(self.clock, VirtualClock), "a served pair's sides are stepped by their engine loops"
        run_until(self.core, self.clock, t_s, self.tell)

    def tell(self) -> None:
        page = self.core.events.since(self._cursor)
        self._cursor = page.next_cursor
        if page.events:
            self._on_events(self.role, page.events)


class PDCore:
    """A prefill engine, a decode engine and the link between them (module docstring). `clock`:
    served, both sides on it; None: replayed, each side on a virtual clock (`run_until`)."""

    def __init__(self, config: EngineConfig, hash_key: bytes | None = None, clock: Clock | None = None) -> None:
        self.config = config
        self.pd = config.pd
        key = hash_key or secrets.token_bytes(32)
        plain = {"pd.enabled": False}
        self._clock = clock
        self.sides = {
            role: _Side(with_overrides(config, {**plain, **overrides}), key, self._told, role, clock)
            for role, overrides in ((PREFILL, self.pd.prefill), (DECODE, self.pd.decode))
        }
        self.prefill.outside_refs = lambda: (b for p in self.requests.values() for b in p.source_blocks)
        self.decode.outside_refs = lambda: (b for p in self.requests.values() for b in p.reservation)
        self.link = KvLink(self.pd.link_gbps, self.pd.link_latency_ms / 1e3, self.pd.transfer_setup_ms / 1e3)
        self.events = EventLog()  # the transfers' own events; each side keeps its engine's
        self.requests: dict[str, PdRequest] = {}  # live ones, and those whose transfer hung
        self._stranded: dict[str, PdRequest] = {}  # finished, a reservation still held (broken target)
        self._pending: dict[str, PdRequest] = {}  # reserving or transferring, in hand-off order
        self._rng = random.Random(self.pd.failure_seed)
        self._now = 0.0
        self.num_transfers = self.num_failed = self.num_timed_out = self.num_fallbacks = 0
        self.failure_rate = self.pd.failure_rate  # chaos (module docstring)
        self.cancel_every = 0
        self.num_chaos_cancels = 0
        self.on_decode: Callable[[PdRequest], None] | None = None  # told when a request starts decoding

    # ------------------------------------------------------------------ intake
    @property
    def prefill(self) -> EngineCore:
        return self.sides[PREFILL].core

    @property
    def decode(self) -> EngineCore:
        return self.sides[DECODE].core

    def now(self) -> float:
        return self._clock.now() if self._clock is not None else self._now

    def add_request(self, **kwargs) -> PdRequest:
        """Admit a request on the prefill side (`EngineCore.add_request`'s arguments; a refusal
        raises its `RequestError`). It then lives on as the module docstring says. A session is
        not carried over (neither side keeps turns): the prefix caches do the reuse."""
        kwargs = {**kwargs, "session_id": None}
        first = {**kwargs, "max_new_tokens": 1, "eos_after": None}
        self._decode_admission(kwargs)  # a decode-side refusal now, before the prefill is spent
        r = self.prefill.add_request(**first)
        pdr = PdRequest(r.request_id, r.tenant, self.now(), {**kwargs, "request_id": r.request_id}, r)
        self.requests[r.request_id] = pdr
        self.sides[PREFILL].tell()
        return pdr

    def abort(self, request_id: str) -> bool:
        """Cancel in any state; both sides' blocks are released (unless broken on purpose)."""
        pdr = self.requests.get(request_id)
        if pdr is None or pdr.state is PdState.FINISHED:
            return False
        if pdr.state is PdState.PREFILLING:
            self.prefill.abort(request_id)
            self.sides[PREFILL].tell()
        elif pdr.state is PdState.DECODING:
            self.decode.abort(request_id)
            self.sides[DECODE].tell()
        else:  # reserving or transferring: nothing runs on either engine, the pair releases
            self._emit(EventKind.CANCEL_RECEIVED, pdr)
            if pdr.state is PdState.TRANSFERRING:
                self._emit(EventKind.TRANSFER_FAILED, pdr, reason="cancelled", mode="error")
            self._release_source(pdr)
            self._end(pdr, FinishReason.CANCELLED.value, self.now(), aborted=True)
        return True

    # ------------------------------------------------------------------- time
    def has_work(self) -> bool:
        """Whether anything can still change: a side has work or a hand-off is pending."""
        return self.has_pending() or any(s.core.has_work() for s in self.sides.values())

    def has_pending(self) -> bool:
        """Whether a hand-off waits to be settled (a reservation, a transfer in flight)."""
        return bool(self._pending)

    def settle(self) -> None:
        """Served: land or fail transfers, time out waits, reserve for those that wait, now."""
        self._settle(self.now())

    def run_until(self, t_s: float) -> None:
        """Replayed: bring both sides and the link to `t_s` (math.inf: until nothing can change)."""
        assert self._clock is None, "a served pair runs on its clock; its server calls settle"
        tick = self.pd.tick_ms / 1e3
        while self._now < t_s:
            if math.isinf(t_s) and not self.has_work():
                return
            busy = self._pending or self.prefill.has_work()  # a hand-off may come: keep the sides in step
            nxt = min(t_s, self._now + tick) if busy else t_s
            for side in self.sides.values():
                side.advance(nxt)
            if math.isinf(nxt):  # nothing more can come from the prefill side: the decode side ran out
                self._now = max(self._now, *(side.clock.now() for side in self.sides.values()))
                return
            self._now = nxt
            self._settle(nxt)

    # --------------------------------------------------------------- hand-offs
    def _told(self, role: str, events: list) -> None:
        for e in events:
            pdr = self.requests.get(e.request_id) if e.request_id else None
            if pdr is None:
                continue
            active = PdState.PREFILLING if role == PREFILL else PdState.DECODING
            if e.kind is EventKind.REJECTED and pdr.state is active:  # left a queue: the client's 429 says why
                self._emit(EventKind.REJECTED, pdr, e.t_s, reason=e.reason)
            if role == PREFILL and e.kind is EventKind.FINISHED and pdr.state is PdState.PREFILLING:
                self._prefilled(pdr, e.t_s)
            elif role == DECODE and pdr.state is PdState.DECODING:
                if e.kind is EventKind.SCHEDULED:
                    if not pdr.fell_back:
                        self._pulled_are_not_hits(pdr)
                    self._release_reservation(pdr, e.t_s)
                elif e.kind is EventKind.FIRST_TOKEN:
                    pdr.first_token_s = e.t_s
                    self._emit(EventKind.FIRST_TOKEN, pdr, e.t_s, latency_s=e.t_s - pdr.arrival_s)
                elif e.kind is EventKind.FINISHED:
                    self._end(pdr, e.reason, e.t_s, aborted=e.reason == FinishReason.CANCELLED.value)

    def _pulled_are_not_hits(self, pdr: PdRequest) -> None:
        """The decode side found its prompt in the blocks it pulled: those are the transfer's,
        not its cache's. Its pool counts them apart, and the answer's cached tokens are the
        prefill side's hits."""
        r = pdr.decode
        assert r is not None
        found = r.num_prefix_hit_tokens // self.decode.memory.block_tokens
        self.decode.pool.count_as_external(max(0, found - len(pdr.held_blocks)))
        r.num_prefix_hit_tokens = pdr.prefill.num_prefix_hit_tokens

    def _prefilled(self, pdr: PdRequest, t_s: float) -> None:
        """The prefill ended: hold its prompt blocks for the pull, or end the request."""
        r = pdr.prefill
        if pdr.lost:
            self._end(pdr, FinishReason.WORKER_LOST.value, t_s)
            return
        if r.finish_reason not in (FinishReason.LENGTH, FinishReason.STOP):
            self._end(pdr, r.finish_reason.value if r.finish_reason else "error", t_s)
            return
        pool, bt = self.prefill.pool, self.prefill.memory.block_tokens
        hashes = r.block_hashes[: r.num_prompt_tokens // bt]
        source = pool.cached_prefix(hashes)  # its blocks went to the cached tier at its finish, a moment ago
        pool.incref(source, t_s)
        pdr.source_blocks, pdr.pull_hashes = source, hashes[: len(source)]
        pdr.state, pdr.handoff_s = PdState.RESERVING, t_s
        self._pending[pdr.request_id] = pdr

    def _settle(self, now: float) -> None:
        """At a tick: land or fail transfers, time out waits, reserve for those that wait."""
        timeout = self.pd.transfer_timeout_ms / 1e3
        for pdr in list(self._pending.values()):
            assert pdr.handoff_s is not None
            if pdr.state is PdState.RESERVING:
                if now >= pdr.handoff_s + timeout:
                    self._failed(pdr, "timeout")
                else:
                    self._reserve(pdr, now)
                continue
            assert pdr.transfer_end_s is not None
            if pdr.transfer_end_s > pdr.handoff_s + timeout and now >= pdr.handoff_s + timeout:
                self._failed(pdr, "timeout")
            elif now >= pdr.transfer_end_s:
                self._failed(pdr, "failed") if pdr.transfer_fails else self._landed(pdr, now)

    def _decode_admission(self, submit: dict) -> AdmissionAction | None:
        """What the decode side's own admission would do with the request now (admit, queue;
        None: it cannot tell); raises its refusal."""
        ids = submit.get("prompt_token_ids")
        decision = self.decode.refuse_early(
            tenant=submit["tenant"],
            min_prompt_tokens=len(ids) if ids is not None else submit.get("num_prompt_tokens") or 0,
            max_new_tokens=submit.get("max_new_tokens"),
            request_id=submit.get("request_id") or "",
            client_request_id=submit.get("client_request_id"),
        )
        return None if decision is None else decision.action

    def _reserve(self, pdr: PdRequest, now: float) -> None:
        """The decode side's blocks for the pull, taken once its admission would take the
        request (its class limits, its tenant caps); else it waits, or ends with its refusal."""
        try:
            if self._decode_admission(pdr.submit) is AdmissionAction.QUEUE:
                return
        except RequestError as err:
            self._refused(pdr, err, now)
            return
        pool = self.decode.pool
        held = pool.cached_prefix(pdr.pull_hashes)
        missing = len(pdr.pull_hashes) - len(held)
        pool.incref(held, now)
        reserved = pool.allocate(missing, pdr.tenant, now)
        if reserved is None:
            pool.decref(held, now)
            return
        pdr.held_blocks, pdr.reserved_blocks = held, reserved
        num_bytes = missing * self.decode.memory.bytes_per_block
        pdr.transfer_end_s = self.link.book(now, num_bytes)
        pdr.transfer_fails = self._rng.random() < self.failure_rate
        pdr.state = PdState.TRANSFERRING
        self.num_transfers += 1
        bt = self.decode.memory.block_tokens
        self._emit(EventKind.TRANSFER_STARTED, pdr, num_blocks=missing, num_bytes=num_bytes, num_tokens=len(held) * bt)
        if self.cancel_every and self.num_transfers % self.cancel_every == 0:  # chaos: the cancel mid-transfer
            self.num_chaos_cancels += 1
            self.abort(pdr.request_id)

    def _landed(self, pdr: PdRequest, now: float) -> None:
        """The KV is on the decode side: its blocks hold the prompt's hashes; decode starts."""
        assert pdr.handoff_s is not None
        pulled = pdr.source_blocks[len(pdr.held_blocks) :]  # the prefill side's copies of the reserved blocks
        self.decode.executor.import_blocks(self.prefill.executor.export_blocks(pulled), pdr.reserved_blocks)
        self.decode.pool.register_many(pdr.reserved_blocks, pdr.pull_hashes[len(pdr.held_blocks) :])
        self._release_source(pdr)
        num_bytes = len(pdr.reserved_blocks) * self.decode.memory.bytes_per_block
        self._emit(
            EventKind.TRANSFER_FINISHED,
            pdr,
            num_blocks=len(pdr.reserved_blocks),
            num_bytes=num_bytes,
            latency_s=now - pdr.handoff_s,
        )
        self._start_decode(pdr, now)

    def _failed(self, pdr: PdRequest, reason: str) -> None:
        assert pdr.handoff_s is not None
        resolve, local = self.pd.resolve_failed_transfers, self.pd.on_failure is PdFailure.LOCAL_PREFILL
        mode = "unresolved" if not resolve else "local_prefill" if local else "error"
        self.num_failed += reason != "timeout"
        self.num_timed_out += reason == "timeout"
        pdr.failure = reason
        now = self.now()
        self._emit(EventKind.TRANSFER_FAILED, pdr, reason=reason, mode=mode, latency_s=now - pdr.handoff_s)
        if not resolve:
            pdr.state, pdr.hung = PdState.TRANSFERRING, True
            del self._pending[pdr.request_id]
            return
        self._release_source(pdr)
        self._release_reservation(pdr, now)
        if local:
            pdr.fell_back = True
            self.num_fallbacks += 1
            self._start_decode(pdr, now)
        else:
            self._end(pdr, "error", now)

    def _start_decode(self, pdr: PdRequest, now: float) -> None:
        self._pending.pop(pdr.request_id, None)
        try:
            pdr.decode = self.decode.add_request(**pdr.submit)
        except RequestError as err:
            self._refused(pdr, err, now)
            return
        pdr.state = PdState.DECODING
        if self.on_decode is not None:
            self.on_decode(pdr)

    def _refused(self, pdr: PdRequest, err: RequestError, now: float) -> None:
        """The decode side's own refusal, as its 4xx tells the client: both sides let go."""
        pdr.refusal = err
        self._release_source(pdr)
        self._release_reservation(pdr, now)
        self._emit(EventKind.REJECTED, pdr, now, reason=err.code)
        self._end(pdr, FinishReason.REJECTED.value, now)

    def lose_prefill(self) -> int:
        """Chaos: the prefill engine dies with what is on it (module docstring). Returns how
        many requests it took down or cut off from their source."""
        touched = 0
        for pdr in list(self.requests.values()):
            if pdr.state is PdState.PREFILLING:
                pdr.lost = True
                self.prefill.abort(pdr.request_id)  # its blocks back now or after the step in flight
            elif pdr.state in (PdState.RESERVING, PdState.TRANSFERRING) and not pdr.hung:
                self._failed(pdr, "source_lost")
            else:
                continue
            touched += 1
        self.sides[PREFILL].tell()
        return touched

    # ---------------------------------------------------------------- release
    def _release_source(self, pdr: PdRequest) -> None:
        if pdr.source_blocks:
            self.prefill.pool.decref(pdr.source_blocks, self.sides[PREFILL].clock.now())
            pdr.source_blocks = []

    def _release_reservation(self, pdr: PdRequest, t_s: float) -> None:
        if pdr.reservation:
            self.decode.pool.decref(pdr.reservation, max(t_s, self.sides[DECODE].clock.now()))
            self._emit(EventKind.RESERVATION_RELEASED, pdr, t_s, num_blocks=len(pdr.reservation), reason="pd_decode")
            pdr.held_blocks, pdr.reserved_blocks = [], []

    def _end(self, pdr: PdRequest, reason: str | None, t_s: float, *, aborted: bool = False) -> None:
        """The request is over; an aborted one keeps its reservation only on a broken target.
        Its `finished` event is the client's view of it (the sides' own say what each did)."""
        self._pending.pop(pdr.request_id, None)
        if not (aborted and not self.pd.release_reservation_on_abort):
            if aborted and pdr.decode is None:  # cancelled mid-transfer: the pair's own release
                self._emit(EventKind.BLOCKS_RELEASED, pdr, t_s, num_blocks=len(pdr.reservation), latency_s=0.0)
            self._release_reservation(pdr, t_s)
        pdr.state, pdr.finish_reason, pdr.finish_s = PdState.FINISHED, reason, t_s
        del self.requests[pdr.request_id]
        if pdr.reservation:
            self._stranded[pdr.request_id] = pdr
        num_tokens = pdr.decode.num_output_tokens if pdr.decode is not None else 0
        self._emit(EventKind.FINISHED, pdr, t_s, reason=reason, num_tokens=num_tokens, latency_s=t_s - pdr.arrival_s)

    def _emit(self, kind: EventKind, pdr: PdRequest, t_s: float | None = None, **columns) -> None:
        t = self.now() if t_s is None else t_s
        self.events.emit(t, kind, request_id=pdr.request_id, tenant=pdr.tenant, **columns)

    # -------------------------------------------------------------- telemetry
    def stranded_blocks(self) -> int:
        """Decode blocks reserved for requests that are no longer live (0 on a healthy engine)."""
        return sum(len(p.reservation) for p in self._stranded.values())

    def counts(self) -> dict[str, float]:
        """The transfers' counts and what a broken pair leaves behind (meta.final.pd)."""
        return {
            "num_transfers": self.num_transfers,
            "num_failed": self.num_failed,
            "num_timed_out": self.num_timed_out,
            "num_fallbacks": self.num_fallbacks,
            "num_chaos_cancels": self.num_chaos_cancels,
            "bytes_moved": self.link.bytes_moved,
            "stranded_reservation_blocks": self.stranded_blocks(),
            "unresolved_transfers": len(self.hung()),
        }

    def hung(self) -> list[PdRequest]:
        """Requests whose failed transfer nobody resolved (none on a healthy engine)."""
        return [p for p in self.requests.values() if p.hung]

    def snapshot(self) -> dict[str, UsageSnapshot]:
        return {role: side.core.snapshot() for role, side in self.sides.items()}

    def close(self) -> None:
        for side in self.sides.values():
            side.core.close()
