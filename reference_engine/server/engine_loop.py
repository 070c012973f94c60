"""The engine loop: the one asyncio task per process that owns the EngineCore and lets its
modelled GPU time pass for real.

    begin_step() -> sleep until the step's t_end_s on the engine clock -> end_step()
                 -> wake the responses whose requests produced tokens or ended -> next step

The core stamps every event with the step's *modelled* end time, so wall-clock TTFT and
inter-token gaps follow the sim's time model. While work goes on without a pause, each step
starts at the previous one's modelled end, as a GPU starts its next step when the last one
ends: a timer that fires late (by 1-4 ms) or a handler that holds the loop delays when the
loop gets to the step, not the engine's time, so lateness never adds up step after step (the
core still starts no step before an arrival or cancel it has logged). Only when the loop falls
more than `MAX_BEHIND_S` behind the wall clock does it resync and start the step now.
`on_step(lag_s)` reports, for every step, how late the loop came to it (CPU spent in HTTP
handlers, JSON, sockets, timer slack), so the metric that matters is measured, not guessed.

With `kv_sink`, `pump` also hands the KV cache events of the core (what its prefix cache stored
and evicted) to the publisher, in the order the steps made them.

Handlers never step the core: they `submit` (admission runs synchronously and raises a
`RequestError` straight away) and `abort`; both are plain calls, safe between awaits because
everything runs on one event loop, and an abort during a step in flight is deferred by the
core itself. Data flows one way: after every step the loop reads the core's event log by cursor
(`pump`), closes the streams of finished requests and hands the events to observers (metrics).

An exception inside a step is logged, the requests in the engine end with worker_lost, and the
loop goes on serving; an observer that raises is logged and skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from record.errors import RequestError
from record.events import Event, EventKind
from reference_engine.core.engine import EngineCore
from reference_engine.request import FinishReason, Request
from reference_engine.server.kv_event_publisher import KvEventSink

log = logging.getLogger("kvgate.engine")

_BLOCKED_POLL_S = 0.005  # work waiting but nothing schedulable: re-check this often
# How far the engine's time may trail the wall clock before the loop resyncs (starts the next
# step now instead of at the previous step's modelled end). Ordinary lateness stays well below
# it: a timer fires ≈ 0.7 ms late at P50 and ≈ 5 ms at P99 on a loaded 2-core machine
# (bench/bench_live.py --timer), so a step never resyncs for that (which would bring the drift
# back). Past it the CPU is starved, and catching up would stamp tokens this much before the
# client can get them and send the steps in between back to back: 20 ms bounds both to about
# two decode steps of the default time model.
MAX_BEHIND_S = 0.020
_ERROR_BACKOFF_S = 0.01


class LoopObserver(Protocol):
    def on_events(self, events: Sequence[Event]) -> None: ...

    def on_step(self, lag_s: float) -> None: ...


class RequestStream:
    """What one HTTP response waits on: the progress of one engine request.

    The engine loop is the only writer: `notify` after a step gave the request tokens, `close`
    once the core finished it (for any reason). The response is the only reader and reads the
    tokens straight from `request.output_token_ids` past what it already sent (output tokens
    only ever grow, preemption included), so nothing is copied per token. One waiter at most.

    `request` may be replaced while no token is out yet: a P/D pair's request passes from the
    prefill side to the decode side (server/pd_loop.py), so the response reads it anew each time.
    `refusal`: the error to answer with where it is not the one the finish reason implies.
    """

    __slots__ = ("request", "streaming", "finished", "refusal", "_waiter")

    def __init__(self, request: Request, streaming: bool) -> None:
        self.request = request
        self.streaming = streaming
        self.finished = False
        self.refusal: RequestError | None = None
        self._waiter: asyncio.Future[None] | None = None

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def notify(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        self.finished = True
        self.notify()

    async def wait(self, num_sent: int) -> None:
        """Return once there are tokens past `num_sent`, the request ended, or `notify` was called."""
        if self.finished or len(self.request.output_token_ids) > num_sent:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


class EngineLoop:
    """Steps one EngineCore in real time. Owns `core`; the only caller of its step methods.

    `engine_clock_offset_unix` is the wall-clock unix time at engine time 0, so a harness can
    put engine event times (engine-clock seconds) next to its own wall-clock times.
    """

    def __init__(
        self,
        core: EngineCore,
        *,
        cancel_propagation: bool = True,
        orphan_check_interval_s: float = 5.0,
        kv_sink: KvEventSink | None = None,
    ) -> None:
        self.core = core
        self.kv_sink = kv_sink
        self.cancel_propagation = cancel_propagation
        self.orphan_check_interval_s = orphan_check_interval_s
        self.engine_clock_offset_unix = time.time() - core.clock.now()
        self.ready = False
        self.num_step_errors = 0
        self.num_resyncs = 0  # times the loop came over MAX_BEHIND_S late after a step: it went on from now
        self._observers: list[LoopObserver] = []
        self._streams: dict[str, RequestStream] = {}
        self._cursor = core.events.next_cursor
        self._wakeup = asyncio.Event()
        self._wake_requested_s: float | None = None
        self._prev_step_end_s: float | None = None
        self._next_orphan_check_s = core.clock.now() + orphan_check_interval_s
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def add_observer(self, observer: LoopObserver) -> None:
        self._observers.append(observer)

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Warm up (load pinned prefixes), start stepping; `ready` once the load time has passed.
        A loop stopped before starts again (an app's lifespan may run more than once)."""
        load_s = self.core.pin_prefixes()
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="kvgate-engine-loop")
        asyncio.get_running_loop().call_later(load_s, self._set_ready)
        log.info("engine warming up: pinned prefixes take %.1f ms to load", load_s * 1000)

    def _set_ready(self) -> None:
        self.ready = True
        log.info("engine ready")

    async def stop(self) -> None:
        """End the loop, then fail what is left in the engine. The loop also ends by `_stopping`:
        Python 3.11's asyncio.wait_for swallows a cancel that lands in the turn its waiter
        completes (a wake-up with the shutdown), and the loop would then wait for work for ever."""
        self.ready = False
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            self._wakeup.set()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.core.fail_all(FinishReason.WORKER_LOST, "the server is shutting down")
        self.pump()

    # ---------------------------------------------------------------- intake
    def submit(self, *, streaming: bool, **request_args) -> RequestStream:
        """Add a request to the engine; raises the core's `RequestError` when it is refused."""
        r = self.core.add_request(streaming=streaming, **request_args)
        stream = RequestStream(r, streaming)
        self.follow(stream)
        return stream

    def follow(self, stream: RequestStream) -> None:
        """Wake `stream` with its request's tokens and close it when the request ends: a request
        `submit` added, or one added to the core by another (a P/D pair's hand-off)."""
        self._streams[stream.request_id] = stream
        self.wake()

    def wake(self) -> None:
        """New work in the core: start stepping if the loop was idle."""
        if not self._wakeup.is_set():
            self._wake_requested_s = self.core.clock.now()
            self._wakeup.set()

    def abort(self, stream: RequestStream) -> None:
        """The client went away: free the request's KV now (or at the end of the step in flight)."""
        if stream.finished or not self.cancel_propagation:
            return
        self.core.abort(stream.request_id)
        self._wakeup.set()

    @property
    def num_open_streams(self) -> int:
        return len(self._streams)

    # ----------------------------------------------------------------- events
    def pump(self) -> None:
        """Read new core events: close finished requests' streams, feed the observers, publish
        the KV cache events."""
        kv_events = self.core.kv_events
        if kv_events is not None and len(kv_events) and self.kv_sink is not None:
            self.kv_sink.publish(kv_events.drain())
        page = self.core.events.since(self._cursor)
        self._cursor = page.next_cursor
        if not page.events:
            return
        streams = self._streams
        for event in page.events:
            if event.kind is EventKind.FINISHED:
                assert event.request_id is not None, "the scheduler emits finished with its request id"
                stream = streams.pop(event.request_id, None)
                if stream is not None:
                    stream.close()
        for observer in self._observers:
            try:
                observer.on_events(page.events)
            except Exception:
                log.exception("observer %r failed on %d events; skipped", observer, len(page.events))

    def _observe_step(self, lag_s: float) -> None:
        for observer in self._observers:
            try:
                observer.on_step(lag_s)
            except Exception:
                log.exception("observer %r failed on a step; skipped", observer)

    # ------------------------------------------------------------------- loop
    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._step_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.num_step_errors += 1
                log.exception("engine step failed; failing the requests in the engine and serving on")
                self._recover()
                await asyncio.sleep(_ERROR_BACKOFF_S)

    async def _step_once(self) -> None:
        core, clock = self.core, self.core.clock
        now = clock.now()
        if now >= self._next_orphan_check_s:
            self._next_orphan_check_s = now + self.orphan_check_interval_s
            freed = core.reconcile()
            if freed:
                log.warning("orphan check released %d block references nobody owned", freed)
        step = core.begin_step(start_s=self._continued_start_s(now))
        self.pump()
        if step is None:
            self._prev_step_end_s = None
            await self._wait_for_work()
            return
        started_after = self._prev_step_end_s if self._prev_step_end_s is not None else self._wake_requested_s
        self._wake_requested_s = None
        if started_after is not None:
            self._observe_step(max(0.0, now - started_after))
        await self._sleep_until(step.t_end_s)
        out = core.end_step()
        self._prev_step_end_s = out.t_end_s
        self._deliver(out.outputs)
        self.pump()

    def _continued_start_s(self, now: float) -> float | None:
        """When the next step starts: at the last step's modelled end while work goes on and the
        loop is at most MAX_BEHIND_S behind; None (now) after a pause or past that bound."""
        prev_end = self._prev_step_end_s
        if prev_end is None:
            return None
        if now - prev_end > MAX_BEHIND_S:
            self.num_resyncs += 1
            return None
        return prev_end

    def _deliver(self, outputs: list) -> None:
        """Wake every stream that got a token in this step, every step: its writer sends it
        during the next step's sleep, so a client sees the engine's own inter-token timing."""
        streams = self._streams
        for o in outputs:
            stream = streams.get(o.request.request_id)
            if stream is not None and stream.streaming:
                stream.notify()

    async def _sleep_until(self, t_end_s: float) -> None:
        """Let the step's modelled time pass, asleep: the loop costs no CPU while a step runs
        and the writers woken by the last step use that time. A timer fires a little late
        (epoll counts whole milliseconds, and the kernel adds its slack); bench/bench_live.py
        measures by how much. Always yields at least once, so handlers never starve."""
        # One sleep, never a second for what is left: asyncio may fire a timer up to its clock
        # resolution early, and sleeping those nanoseconds would cost a whole epoll millisecond.
        await asyncio.sleep(max(0.0, t_end_s - self.core.clock.now()))

    async def _wait_for_work(self) -> None:
        core = self.core
        now = core.clock.now()
        timeout = self._next_orphan_check_s - now
        timer = core.next_timer_s()  # queue deadline or session expiry
        if timer is not None:
            timeout = min(timeout, timer - now)
        if core.has_work():
            timeout = min(timeout, _BLOCKED_POLL_S)
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), max(0.0, timeout))
        except TimeoutError:
            pass

    def _recover(self) -> None:
        try:
            self.core.fail_all(FinishReason.WORKER_LOST, "the engine step failed; the error was logged")
            self.pump()
        except Exception:
            log.exception("could not fail the engine's requests cleanly; closing their streams")
        for stream in list(self._streams.values()):
            stream.close()
        self._streams.clear()
        self._prev_step_end_s = None
