"""A locust process's side of an open loop: the slots dealt to it, each sent at its intended time.

    sender = Sender(host, settings, tenants, record=ctx.record)
    sender.receive(origin_unix, slots)     # a deal from the master (origin on this process's clock)
    sender.run(for_s=0.5)                  # the sending loop, in a greenlet, for about that long
    sender.stop()                          # cut what is in flight: one `unfinished` row each

The loop waits for the next slot's time and hands the request to a greenlet of its own, so the
loop never waits for an answer (what an open loop means); at most `max_in_flight` requests are
open at once, and one more waits for a free place: it then leaves late, and its row shows the
lag (`intended_unix` beside `sent_unix`), never a quietly slower schedule. While waiting, the
loop builds the prompts of the slots due within `BUILD_AHEAD_S` (a trace prompt of thousands of
words takes milliseconds; built on time, the last of a burst would leave late). Requests go
through the measurement core every locust user uses (loadgen/exchange.py over
loadgen/gevent_transport.py), each within the request timeout, whatever the target does.

Invariants: `_pending` (dealt, prompt not built) and `_ready` (built) are in due order and every
slot in `_ready` is due no later than every slot in `_pending`; each slot received is sent at most
once. Only `receive` adds slots and only the loop takes them: O(1) each.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

import gevent
import gevent.event
import gevent.pool

from harness.loadgen.exchange import Call, Transport, run_exchange
from harness.loadgen.gevent_transport import GeventTransport
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.schedule import Slot
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet

BUILD_AHEAD_S = 1.0


@dataclass(frozen=True, slots=True)
class _Due:
    slot: Slot
    due_unix: float
    """When it is meant to leave, on this process's clock."""


@dataclass(frozen=True, slots=True)
class _Built:
    due: _Due
    call: Call


class Sender:
    def __init__(
        self,
        host: str,
        settings: LoadSettings,
        tenants: TenantSet,
        *,
        record: Callable[[RequestOutcome], None],
        clock: Callable[[], float] = time.time,
        transport: Transport | None = None,
    ) -> None:
        """`transport`: a test seam (default: geventhttpclient to `host`)."""
        self._settings, self._tenants, self._record, self._clock = settings, tenants, record, clock
        self._own_transport: GeventTransport | None = None
        if transport is None:
            transport = self._own_transport = GeventTransport(host, network_timeout_s=settings.request_timeout_s)
        self._transport = transport
        self._pool = gevent.pool.Pool(settings.max_in_flight)
        self._pending: deque[_Due] = deque()
        self._ready: deque[_Built] = deque()
        self._arrived = gevent.event.Event()
        self._is_running = False
        self._is_stopped = False
        self.num_received = 0
        self.num_sent = 0

    def receive(self, origin_unix: float, slots: list[Slot]) -> None:
        """Slots dealt to this process; `origin_unix` is the schedule's time 0 on its clock."""
        self._pending.extend(_Due(slot, origin_unix + slot.at_s) for slot in slots)
        self.num_received += len(slots)
        self._arrived.set()

    @property
    def num_unsent(self) -> int:
        return len(self._pending) + len(self._ready)

    def run(self, for_s: float) -> None:
        """Send every slot that comes due in the next `for_s` seconds at its time (and, waiting for
        a free place in flight, a little longer). The caller runs it again and again: a locust
        user's task, which must end now and then for the user to stop when asked. A second caller
        (a second user in this process) only waits: one loop per process."""
        if self._is_running:
            gevent.sleep(for_s)
            return
        self._is_running = True
        until = self._clock() + for_s
        try:
            while not self._is_stopped and (now := self._clock()) < until:
                if not self._ready and not self._pending:
                    self._arrived.clear()
                    self._arrived.wait(until - now)
                    continue
                if not self._ready:
                    self._build_next()  # the head is due and not built yet: build it now
                head = self._ready[0]
                due_unix = head.due.due_unix
                wake_unix = min(due_unix, until)
                while self._pending and self._pending[0].due_unix < due_unix + BUILD_AHEAD_S:
                    if self._clock() >= wake_unix:
                        break
                    self._build_next()
                self._sleep_until(wake_unix)
                if self._is_stopped or self._clock() < due_unix:
                    continue  # never early: a timer may fire a little before its time
                self._ready.popleft()
                self._pool.spawn(self._send, head)  # waits while max_in_flight requests are open
                self.num_sent += 1
        finally:
            self._is_running = False

    def _sleep_until(self, unix: float) -> None:
        if (ahead_s := unix - self._clock()) > 0:
            gevent.get_hub().loop.update_now()  # the loop's cached time lags after building prompts
            gevent.sleep(ahead_s)

    def _build_next(self) -> None:
        due = self._pending.popleft()
        self._ready.append(_Built(due, due.slot.call(self._settings, self._tenants)))

    def _send(self, built: _Built) -> None:
        def done(outcome: RequestOutcome) -> None:
            self._record(replace(outcome, intended_unix=built.due.due_unix))

        run_exchange(self._transport, built.call, timeout_s=self._settings.request_timeout_s, on_done=done)

    def stop(self) -> None:
        """End the loop and cut the requests in flight (each records its `unfinished` row)."""
        self._is_stopped = True
        self._arrived.set()
        self._pool.kill()
        if self._own_transport is not None:
            self._own_transport.close()
