"""The loop of a served P/D pair (core/pd.py): each side stepped in real time by its own
`EngineLoop` (two devices on one clock), the hand-offs settled between their steps.

    loop = PdLoop(PDCore(config, clock=MonotonicClock()), cancel_propagation=True, orphan_check_interval_s=5)
    stream = loop.submit(streaming=True, tenant=..., prompt_token_ids=...)   # as EngineLoop.submit

What it adds to the two engine loops, and nothing else (each still owns its core's steps):
- each side's events reach the pair right after the step that made them (an observer of that
  side's loop), so a finished prefill's blocks are held for the pull before a next step could
  evict them, and a decode that starts wakes its side's loop;
- while a hand-off is pending, `PDCore.settle` runs every `pd.tick_ms` (reserve, land, fail,
  time out), as the replay settles at its ticks;
- a request's stream follows it across the hand-off: before it the stream shows a stand-in of
  the request without tokens (the prefill side's one token is the prefill's, not the answer's);
  at the hand-off the decode side's loop takes the stream over (`EngineLoop.follow`); a request
  that ends before it decodes (refused, cancelled, its transfer failed) is closed here with the
  error its client gets;
- one event log of both sides and the pair (`events`): each side's events with its worker
  number (`WORKER`), the pair's own on the decode side, as a replay writes them; the pair's
  client-view events (its first token and finish: what the client records itself) are left out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from record.events import Event, EventKind
from reference_engine.core.pd import CLIENT_KINDS, DECODE, PREFILL, ROLES, PDCore, PdRequest
from reference_engine.request import FinishReason, Request
from reference_engine.server.engine_loop import EngineLoop, RequestStream
from reference_engine.server.merged_events import MergedEventLog

log = logging.getLogger("kvgate.engine")

WORKER = {PREFILL: 0, DECODE: 1}
"""Each side's number where the record names a worker (events, replicas): prefill 0, decode 1."""
_ENDED = {reason.value: reason for reason in FinishReason}


class _SideObserver:
    """Tells the pair one side's events after each of that side's steps, and logs them."""

    def __init__(self, loop: PdLoop, role: str) -> None:
        self.loop, self.role, self.worker = loop, role, WORKER[role]

    def on_events(self, events: Sequence[Event]) -> None:
        for e in events:
            self.loop.events.add(e, self.worker)
        self.loop.pd.sides[self.role].tell()
        self.loop.pump_pair()
        if self.loop.pd.has_pending():  # a prefill ended: its hand-off is settled from now on
            self.loop.hand_offs.set()

    def on_step(self, lag_s: float) -> None:
        pass


class PdLoop:
    """Owns the pair's two engine loops and the link's settling (module docstring)."""

    kv_sink = None  # a served pair publishes no KV cache events (docs/pd.md)

    def __init__(self, pd: PDCore, *, cancel_propagation: bool = True, orphan_check_interval_s: float = 5.0) -> None:
        self.pd = pd
        self.cancel_propagation = cancel_propagation
        self.sides = {
            role: EngineLoop(
                pd.sides[role].core,
                cancel_propagation=cancel_propagation,
                orphan_check_interval_s=orphan_check_interval_s,
            )
            for role in ROLES
        }
        self.events = MergedEventLog()
        for role, loop in self.sides.items():
            loop.add_observer(_SideObserver(self, role))
        pd.on_decode = self._hand_over
        self.engine_clock_offset_unix = time.time() - pd.now()
        self._streams: dict[str, tuple[PdRequest, RequestStream]] = {}
        self._cursor = pd.events.next_cursor
        self.hand_offs = asyncio.Event()  # set while a hand-off may be pending
        self._task: asyncio.Task[None] | None = None

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        for loop in self.sides.values():
            await loop.start()
        self._task = asyncio.create_task(self._settle_loop(), name="kvgate-pd-link")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for loop in self.sides.values():
            await loop.stop()
        self.pump_pair()
        for _, stream in self._streams.values():  # between the sides (reserving, transferring)
            stream.request.finish_reason = FinishReason.WORKER_LOST
            stream.request.finish_detail = "the server is shutting down"
            stream.close()
        self._streams.clear()

    @property
    def ready(self) -> bool:
        return all(loop.ready for loop in self.sides.values())

    @property
    def num_step_errors(self) -> int:
        return sum(loop.num_step_errors for loop in self.sides.values())

    @property
    def num_open_streams(self) -> int:
        return len(self._streams)

    # ---------------------------------------------------------------- intake
    def submit(self, *, streaming: bool, **request_args) -> RequestStream:
        """Admit a request on the prefill side; raises its `RequestError` when it is refused."""
        pdr = self.pd.add_request(streaming=streaming, **request_args)
        stream = RequestStream(_stand_in(pdr.prefill, pdr.submit["max_new_tokens"]), streaming)
        self._streams[pdr.request_id] = (pdr, stream)
        self.sides[PREFILL].wake()
        return stream

    def abort(self, stream: RequestStream) -> None:
        """The client went away: both sides release what they hold for it, in whatever state."""
        if stream.finished or not self.cancel_propagation:
            return
        if self.pd.abort(stream.request_id):
            for loop in self.sides.values():
                loop.wake()
            self.pump_pair()

    def _hand_over(self, pdr: PdRequest) -> None:
        """The decode side runs the request now: its loop wakes the stream from here on."""
        assert pdr.decode is not None, "told once the decode side holds the request"
        followed = self._streams.get(pdr.request_id)
        if followed is None:
            self.sides[DECODE].wake()
            return
        stream = followed[1]
        stream.request = pdr.decode
        self.sides[DECODE].follow(stream)

    # ----------------------------------------------------------------- events
    def pump(self) -> None:
        """Read every new event: each side's, then the pair's own."""
        for loop in self.sides.values():
            loop.pump()
        self.pump_pair()

    def pump_pair(self) -> None:
        """The pair's own events: log them, and close the streams of requests that ended."""
        page = self.pd.events.since(self._cursor)
        self._cursor = page.next_cursor
        for e in page.events:
            if e.kind not in CLIENT_KINDS:
                self.events.add(e, WORKER[DECODE])
            elif e.kind is EventKind.FINISHED and e.request_id is not None:
                followed = self._streams.pop(e.request_id, None)
                if followed is not None:
                    pdr, stream = followed
                    if pdr.decode is None:
                        _end_stand_in(stream, pdr, e.t_s)
                    stream.close()

    # ------------------------------------------------------------------- link
    async def _settle_loop(self) -> None:
        """Settle at once when a prefill ends, then every tick while a hand-off is pending."""
        tick_s = self.pd.pd.tick_ms / 1e3
        while True:
            if not self.pd.has_pending():
                self.hand_offs.clear()
                await self.hand_offs.wait()
            try:
                self.pd.settle()
            except Exception:
                log.exception("settling the P/D hand-offs failed; serving on")
            self.pump_pair()
            await asyncio.sleep(tick_s)


def _stand_in(prefill: Request, max_new_tokens: int | None) -> Request:
    """What the client's stream shows before the decode side takes the request: its identity,
    no token."""
    return Request(
        request_id=prefill.request_id,
        tenant=prefill.tenant,
        traffic_class=prefill.traffic_class,
        num_prompt_tokens=prefill.num_prompt_tokens,
        max_new_tokens=max_new_tokens or prefill.max_new_tokens,
        arrival_s=prefill.arrival_s,
        streaming=prefill.streaming,
        client_request_id=prefill.client_request_id,
    )


def _end_stand_in(stream: RequestStream, pdr: PdRequest, t_s: float) -> None:
    """A request that ended before it decoded: its stand-in takes the end its client is told
    (the prefill side's own end, the decode side's refusal, a transfer that failed)."""
    r = stream.request
    r.finish_s = t_s
    r.finish_reason = _ENDED.get(pdr.finish_reason or "", FinishReason.WORKER_LOST)
    stream.refusal = pdr.refusal
    if pdr.lost:
        r.finish_detail = "the prefill engine was lost while it computed the prompt"
    elif pdr.failure is not None:
        r.finish_detail = f"the KV transfer from the prefill side to the decode side failed ({pdr.failure})"
    elif pdr.prefill.finish_detail is not None:
        r.finish_detail = pdr.prefill.finish_detail
