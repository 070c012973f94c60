"""httpx for many sending threads at once: the open-loop client's transport, whose deadlines
bound a whole exchange.

`HttpxTransport.deadline` does nothing: the baseline probe sends one request at a time and
httpx's per-read timeout bounds each read. An open loop holds hundreds of streams at once, and a
stream that trickles a line now and then never trips a per-read timeout: it would hold its
thread, and the end of the run, for ever. Here a deadline is a timer. When it fires it closes
the exchange's response, and the next read raises the deadline's own error, so the exchange
ends as the measurement core expects (a `timeout` row, or an intended cancel). Before the
response exists (connecting, waiting for the status line) httpx's own timeouts bound the wait.

Each sending thread has its own exchange state (`threading.local`); a state lives from the
first deadline an exchange enters to the last it leaves. The timer thread and the sending
thread share only `_Exchange`, under its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress

import httpx

from harness.loadgen.exchange import RawResponse
from harness.loadgen.httpx_transport import HttpxTransport


class _Exchange:
    """One exchange's deadline state: the response to close, the error of the deadline that fired."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.response: RawResponse | None = None
        self.fired: BaseException | None = None
        self.depth = 0

    def fire(self, error: BaseException) -> None:
        with self.lock:
            if self.fired is not None:
                return
            self.fired, response = error, self.response
        if response is not None:
            with suppress(Exception):  # a stream that is already gone is closed enough
                response.close()  # the reading thread's next read fails, and raises `error`

    def raise_if_fired(self) -> None:
        with self.lock:
            fired = self.fired
        if fired is not None:
            raise fired


class _GuardedResponse:
    """The response, read in the sending thread: once a deadline fired, every read raises its error."""

    def __init__(self, inner: RawResponse, exchange: _Exchange) -> None:
        self._inner, self._exchange = inner, exchange
        self.status, self.headers = inner.status, inner.headers

    def readline(self) -> bytes:
        try:
            line = self._inner.readline()
        except Exception:
            self._exchange.raise_if_fired()
            raise
        self._exchange.raise_if_fired()
        return line

    def read_all(self) -> bytes:
        try:
            body = self._inner.read_all()
        except Exception:
            self._exchange.raise_if_fired()
            raise
        self._exchange.raise_if_fired()
        return body

    def close(self) -> None:
        self._inner.close()


class ThreadedTransport:
    def __init__(self, client: httpx.Client, base_url: str) -> None:
        self._inner = HttpxTransport(client, base_url)
        self._local = threading.local()

    def open(self, path: str, body: bytes, headers: Mapping[str, str]) -> RawResponse:
        exchange: _Exchange | None = getattr(self._local, "exchange", None)
        response = self._inner.open(path, body, headers)
        if exchange is None:
            return response
        guarded = _GuardedResponse(response, exchange)
        with exchange.lock:
            exchange.response, fired = guarded, exchange.fired
        if fired is not None:
            guarded.close()
            raise fired
        return guarded

    @contextmanager
    def deadline(self, seconds: float, error: BaseException) -> Iterator[None]:
        exchange = getattr(self._local, "exchange", None)
        if exchange is None:
            exchange = self._local.exchange = _Exchange()
        exchange.depth += 1
        timer = threading.Timer(seconds, exchange.fire, args=(error,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            exchange.depth -= 1
            if exchange.depth == 0:
                self._local.exchange = None
