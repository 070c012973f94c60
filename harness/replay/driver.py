"""The replay loop: trace arrivals into an `EngineCore` on a `VirtualClock`, records out.

    while arrivals remain or the engine has work:
        add every arrival whose time has come
        busy -> core.step(until_s=next arrival, observe_s=due samples)  event-driven (plans of k steps)
                core.step()                                             --step-by-step
                clock.advance_to(step end)
        idle -> clock jumps to the next arrival
        engine events -> events.csv and the client view (requests.csv); samples due -> samples.csv

A plan of several steps runs only steps that start before `until_s`, so arrivals are added at
exactly the same step boundaries in both modes; it runs through sample times, and the engine
answers each with a snapshot taken at the first step boundary at or after it, the state the
step-by-step driver samples there. The two write identical records
(tests/integration/test_replay_equivalence.py holds them to it).

A step that finds nothing to run while requests wait (all blocked on memory) would leave the clock
where it is; the driver then jumps to the next moment something can change — an arrival or the
engine's next timer (`EngineCore.next_timer_s`: a queue deadline, a session expiry) — and stops
with `ReplayStalled` when there is none, instead of looping forever.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from harness.replay.client_view import ClientView
from harness.replay.prefix_blocks import PrefixBlockMapper
from harness.replay.samples import sample_row, tenant_rows
from harness.replay.trace import TraceRequest
from record.errors import KvgateError, RequestError
from record.events import Event
from reference_engine import EngineCore, VirtualClock
from reference_engine.core.snapshot import UsageSnapshot

_FLUSH_ROWS = 4096
_SAMPLES_PER_CALL = 64  # sample times handed to one engine call at most


class ReplayStalled(KvgateError):
    """The engine holds requests it can never start, and nothing is left that could change that."""


class MaxTokens(str, Enum):
    """What a replayed request sends as max_tokens. Either way the sim stops the answer at the
    trace's recorded output length (finish reason `stop`)."""

    TRACE = "trace"  # the recorded output length: admission plans with the true size
    UNSET = "unset"  # nothing: the engine assumes admission.max_new_tokens_default (and caps output there)


@dataclass(frozen=True, slots=True)
class Arrival:
    request: TraceRequest
    tenant: str

    @property
    def request_id(self) -> str:
        return f"r{self.request.row}"


@dataclass(frozen=True, slots=True)
class Intake:
    """How an arrival becomes `add_request`'s arguments: the trace's prefix ids as block keys in
    its tenant's scope, max_tokens as the replay sends it. The P/D replay sends the same."""

    mapper: PrefixBlockMapper | None
    scopes: Mapping[str, int]
    max_tokens: MaxTokens

    def limit(self, req: TraceRequest) -> int | None:
        return req.num_output_tokens if self.max_tokens is MaxTokens.TRACE else None

    def arguments(self, a: Arrival) -> dict[str, Any]:
        req = a.request
        hashes = public = None
        if self.mapper is not None and req.prefix_ids:
            blocks = self.mapper.map(req.prefix_ids, req.num_prompt_tokens, self.scopes[a.tenant])
            hashes, public = blocks.block_hashes, blocks.public_prefix_tokens
        return {
            "tenant": a.tenant,
            "num_prompt_tokens": req.num_prompt_tokens,
            "prompt_block_hashes": hashes,
            "public_prefix_tokens": public,
            "max_new_tokens": self.limit(req),
            "eos_after": req.num_output_tokens,
            "session_id": req.session_id,
            "streaming": True,
            "request_id": a.request_id,
        }

    def refused(self, view: ClientView, a: Arrival, traffic_class: str, now_s: float, err: RequestError) -> dict:
        """The complete requests.csv row of an arrival refused at once."""
        req = a.request
        return view.refused(
            a.request_id,
            a.tenant,
            traffic_class,
            req.arrival_s,
            now_s,
            req.num_prompt_tokens,
            self.limit(req),
            req.session_id,
            err,
        )


class RecordSink(Protocol):
    """Where rows go: `RunRecordWriter`, or a list-backed fake in tests."""

    def append(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None: ...


@dataclass(frozen=True, slots=True)
class DriveStats:
    end_s: float  # virtual time when the engine drained
    last_arrival_s: float
    last_sample_s: float  # the first sample at or after the drain: the record's end
    num_iterations: int  # driver loop turns (engine calls)
    num_refused: int  # refused at arrival (add_request raised)


class ReplayDriver:
    """Runs one replay. Owns the clock's movement; the core owns everything else."""

    def __init__(
        self,
        core: EngineCore,
        clock: VirtualClock,
        arrivals: Sequence[Arrival],
        sink: RecordSink,
        *,
        mapper: PrefixBlockMapper | None,
        max_tokens: MaxTokens,
        sample_interval_s: float,
        step_by_step: bool,
        scenario: str,
    ) -> None:
        if not sample_interval_s > 0:
            raise ValueError("sample_interval_s must be positive")
        self.core, self.clock, self.arrivals, self.sink = core, clock, arrivals, sink
        self.intake = Intake(mapper, {t.name: t.scope for t in core.tenants}, max_tokens)
        self.sample_interval_s = sample_interval_s
        self.step_by_step = step_by_step
        self.view = ClientView(scenario)
        self._caps = {t.name: t.config.max_kv_share for t in core.tenants}
        self._cursor = core.events.next_cursor
        self._num_samples = 0
        self._buffers: dict[str, list[dict]] = {"requests": [], "events": [], "samples": [], "tenant_samples": []}
        self._num_refused = 0

    # ------------------------------------------------------------------ loop
    def run(self, on_progress: Callable[[float], None] | None = None) -> DriveStats:
        core, clock, arrivals = self.core, self.clock, self.arrivals
        n, i, iterations = len(arrivals), 0, 0
        while True:
            now = clock.now()
            while i < n and arrivals[i].request.arrival_s <= now:
                self._submit(arrivals[i])
                i += 1
            next_arrival = arrivals[i].request.arrival_s if i < n else math.inf
            if core.has_work():
                iterations += 1
                if self.step_by_step:
                    out = core.step()
                else:
                    observe, until = self._samples_before(next_arrival)
                    out = core.step(until, observe)
                    for _, snap in out.observations:
                        self._sample(snap)
                clock.advance_to(self._next_change_s(next_arrival) if out.idle else out.t_end_s)
            elif i < n:
                clock.advance_to(next_arrival)
            else:
                break
            self._drain_events()
            if self._sample_until(clock.now()) and on_progress is not None:
                on_progress(clock.now())
        last_sample_s = self._next_sample_s()
        self._sample()  # the first one at or after the drain: it shows the drained state
        self.flush()
        last = arrivals[-1].request.arrival_s if arrivals else 0.0
        return DriveStats(clock.now(), last, last_sample_s, iterations, self._num_refused)

    def _next_change_s(self, next_arrival_s: float) -> float:
        """The earliest time an engine that cannot start anything changes: the next arrival or the
        engine's own next timer (queue deadline, session expiry)."""
        now = self.clock.now()
        later = [t for t in (next_arrival_s, self.core.next_timer_s()) if t is not None and now < t < math.inf]
        if not later:
            raise ReplayStalled(
                f"at t={now:.3f}s the engine holds {len(self.core.scheduler.waiting)} waiting "
                f"request(s) it cannot start and nothing left can free memory; the policy "
                f"cannot serve this trace"
            )
        return min(later)

    # ---------------------------------------------------------------- intake
    def _submit(self, a: Arrival) -> None:
        core = self.core
        try:
            r = core.add_request(**self.intake.arguments(a))
        except RequestError as err:
            self._num_refused += 1
            traffic_class = core.tenants[a.tenant].traffic_class.value
            self._buffers["requests"].append(self.intake.refused(self.view, a, traffic_class, self.clock.now(), err))
        else:
            self.view.sent(r, a.request.arrival_s)

    # ---------------------------------------------------------------- output
    def _drain_events(self) -> None:
        if self.core.events.next_cursor == self._cursor:
            return
        page = self.core.events.since(self._cursor)
        assert not page.missed, "the driver drains the event log every step; nothing can be missed"
        self._cursor = page.next_cursor
        if page.events:
            self._buffers["events"].extend(map(Event.to_row, page.events))
            self._buffers["requests"].extend(self.view.observe(page.events))
            if len(self._buffers["events"]) >= _FLUSH_ROWS:
                self.flush()

    def _next_sample_s(self, ahead: int = 0) -> float:
        return (self._num_samples + ahead) * self.sample_interval_s  # by index: no drift from repeated addition

    def _samples_before(self, next_arrival_s: float) -> tuple[list[float], float]:
        """The due sample times the engine may reach in one call (it answers those it reaches
        with snapshots), and when it stops: the next arrival, or past the last of them."""
        times: list[float] = []
        for i in range(_SAMPLES_PER_CALL):
            t = self._next_sample_s(i)
            if t >= next_arrival_s:
                return times, next_arrival_s
            times.append(t)
        return times, self._next_sample_s(_SAMPLES_PER_CALL)

    def _sample_until(self, now_s: float) -> bool:
        """Take every sample due at or before `now_s`; True if any was due."""
        due = self._next_sample_s() <= now_s
        while self._next_sample_s() <= now_s:
            self._sample()
        return due

    def _sample(self, snap: UsageSnapshot | None = None) -> None:
        """Take the next sample: from the engine now, or the snapshot the engine took for it."""
        t_s = self._next_sample_s()
        assert snap is None or snap.t_s >= t_s, "a snapshot answers the sample due at or before it"
        snap = snap or self.core.snapshot()
        self._buffers["samples"].append(sample_row(snap, t_s))
        self._buffers["tenant_samples"].extend(tenant_rows(snap, t_s, self._caps))
        self._num_samples += 1

    def flush(self) -> None:
        for table, rows in self._buffers.items():
            if rows:
                self.sink.append(table, rows)
                rows.clear()
