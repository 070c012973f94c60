"""Open-loop sending: every request at its intended time, whatever the target does meanwhile.

    client = OpenLoopClient(url, timeout_s=120, max_in_flight=256, origin_unix=run_t0, on_row=rows.append)
    sent = dispatch(workload.arrivals(settings, tenants, 60.0), client.submit)   # sent.origin_unix: time 0
    num_open = client.drain(timeout_s=130)           # wait for the answers; cut what is left
    client.close()

`dispatch` is the schedule (pure, its clock and sleep injected): it hands each `Arrival` to
`submit` once its intended time has come, never early. Rows' times count from `run_t0` (the
run record's origin). `OpenLoopClient` sends on a pool of
threads over one httpx client through the same measurement core as every other request
(loadgen/exchange.py; its request timeout bounds the whole exchange, even a stream that
trickles: loadgen/threaded_transport.py), and writes each outcome as a run-record row that also carries
`intended_s`; the client lag of a request is `sent_s − intended_s` (loadgen/client_lag.py).
A pool whose threads are all busy queues the next request, which is then sent late: that
shows as lag, never as a quietly slower schedule.

A `Workload` makes the arrivals (loadgen/chat_workload.py: chat at a rate;
harness/trace_workload.py: a request trace). The module needs no locust and no gevent.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from harness.loadgen.exchange import REUSE_IDLE_S, Call, run_exchange
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet
from harness.loadgen.threaded_transport import ThreadedTransport

INTENDED_COLUMN = "intended_s"
LOOKAHEAD_S = 1.0


@dataclass(frozen=True, slots=True)
class Arrival:
    """A request and when it is meant to be sent (seconds since the load began)."""

    at_s: float
    call: Call


class Workload(Protocol):
    """What an open-loop load sends, and when."""

    @property
    def name(self) -> str:
        """The rows' scenario."""

    def arrivals(self, settings: LoadSettings, tenants: TenantSet, duration_s: float) -> Iterator[Arrival]:
        """Arrivals in time order, all before `duration_s`; made lazily (a prompt is built only
        when its turn comes)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What meta.json says about the load."""
        ...


@dataclass(frozen=True)
class Dispatched:
    num_sent: int
    origin_unix: float
    """When the schedule's time 0 was, on the dispatch clock."""


def dispatch(
    arrivals: Iterable[Arrival],
    submit: Callable[[Arrival, float], None],
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[], None] = lambda: None,
    lookahead_s: float = LOOKAHEAD_S,
) -> Dispatched:
    """Hand each arrival to `submit(arrival, intended_unix)` at its intended time on `clock`.

    Making an arrival (a trace prompt of thousands of words) takes milliseconds, and a trace may
    start with dozens at the same instant: made on time, the last of them would leave late. So
    the first `lookahead_s` of arrivals are made before the schedule's clock starts, and later
    ones while waiting for the next send, as far ahead as `lookahead_s` and only while the next
    send is not yet due. `on_wait` is called before each wait (a progress display)."""
    pending = iter(arrivals)
    ready: deque[Arrival] = deque()

    def make_next() -> bool:
        arrival = next(pending, None)
        if arrival is not None:
            ready.append(arrival)
        return arrival is not None

    more = make_next()
    while more and ready[-1].at_s - ready[0].at_s < lookahead_s:
        more = make_next()
    origin, num = clock(), 0
    while ready:
        head = ready.popleft()
        due = origin + head.at_s
        on_wait()
        while more and clock() < due and (not ready or ready[-1].at_s < head.at_s + lookahead_s):
            more = make_next()
        if (ahead := due - clock()) > 0:
            sleep(ahead)
        submit(head, due)
        num += 1
        if not ready and more:
            more = make_next()
    return Dispatched(num, origin)


def open_loop_row(outcome: RequestOutcome, intended_unix: float, origin_unix: float) -> dict[str, Any]:
    """The requests.csv row of an open-loop request: the outcome's, plus its intended send time."""
    return {**outcome.row(origin_unix), INTENDED_COLUMN: intended_unix - origin_unix}


class OpenLoopClient:
    """Sends arrivals on up to `max_in_flight` threads; each outcome becomes one row.

    `on_row` is called from the sending threads, one call at a time (a lock), exactly once per
    request sent. `drain` waits for the requests in flight; each ends within the request timeout
    (a `timeout` row), so a drain limit above it is reached only by a harness fault, and then
    what is left is cut by closing the client."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        max_in_flight: int,
        origin_unix: float,
        on_row: Callable[[Mapping[str, Any]], None],
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = httpx.Client(
            timeout=timeout_s,
            transport=transport,
            limits=httpx.Limits(
                max_connections=max_in_flight, max_keepalive_connections=max_in_flight, keepalive_expiry=REUSE_IDLE_S
            ),
        )
        self._transport = ThreadedTransport(self._client, base_url)
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="open-loop")
        self._timeout_s = timeout_s
        self._origin_unix = origin_unix
        self._on_row = on_row
        self._lock = threading.Lock()
        self._futures: list[Future[None]] = []
        self._num_in_flight = 0
        self.peak_in_flight = 0
        """The most requests open at once: at `max_in_flight`, later ones waited for a thread."""

    def submit(self, arrival: Arrival, intended_unix: float) -> None:
        self._futures.append(self._pool.submit(self._send, arrival.call, intended_unix))

    def _send(self, call: Call, intended_unix: float) -> None:
        def done(outcome: RequestOutcome) -> None:
            with self._lock:
                self._num_in_flight -= 1
                self._on_row(open_loop_row(outcome, intended_unix, self._origin_unix))

        with self._lock:
            self._num_in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._num_in_flight)
        run_exchange(self._transport, call, timeout_s=self._timeout_s, on_done=done)

    def drain(self, timeout_s: float) -> int:
        """Wait up to `timeout_s` for every request sent; the number still open then."""
        done, pending = wait(self._futures, timeout=timeout_s)
        for future in done:
            if (err := future.exception()) is not None:  # a bug in the harness: no row pretends to know
                raise err
        return len(pending)

    def close(self) -> None:
        """Stop: requests not yet sent are dropped, requests in flight are cut."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
        self._pool.shutdown(wait=True)
