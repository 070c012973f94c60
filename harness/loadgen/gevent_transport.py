"""The locust users' transport: geventhttpclient (what locust's FastHttpUser runs on), one
connection per request in flight.

Why not the FastHttpUser session's pooled `request()`: a cancel must hang up at once, also
while the response headers are still awaited (the reference engine holds its status line back
until the first token, so a mid-prefill cancel happens there), and locust's session would
record the request itself with a time that stops at the headers. Here each request in flight
has its own single-connection `HTTPClient`; a finished request gives it back for keep-alive
reuse, an interrupted one closes it, so the server sees the disconnect and nothing leaks into
the next request. Deadlines are `gevent.Timeout`s: they raise wherever the greenlet blocks.

A connection idle for `REUSE_IDLE_S` or longer is closed, not reused (exchange.py says why); a
connection closed before any answer is a connection error, not a malformed answer.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping

import gevent
from geventhttpclient import URL, HTTPClient
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse

from harness.loadgen.exchange import REUSE_IDLE_S, TransportError
from harness.loadgen.outcome import ClientCode

_FAILURES = (OSError, HTTPConnectionClosed, HTTPParseError)  # socket.error and its timeouts are OSErrors


def _transport_error(err: BaseException) -> TransportError:
    if isinstance(err, socket.timeout):
        return TransportError(ClientCode.TIMEOUT, f"network timeout: {err}")
    if isinstance(err, HTTPConnectionClosed):  # a parse error's subclass: no answer came at all
        return TransportError(ClientCode.CONNECTION_ERROR, f"the server closed the connection: {err}")
    if isinstance(err, HTTPParseError):
        return TransportError(ClientCode.BAD_RESPONSE, f"not an HTTP answer: {err}")
    return TransportError(ClientCode.CONNECTION_ERROR, f"{type(err).__name__}: {err}")


class GeventResponse:
    """An open response; `close()` returns its connection for reuse only if the body was read to its end."""

    def __init__(self, raw: HTTPSocketPoolResponse, client: HTTPClient, transport: GeventTransport) -> None:
        self._raw, self._transport = raw, transport
        self._client: HTTPClient | None = client  # None once given back
        self.status = raw.status_code
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in raw.items()}

    def readline(self) -> bytes:
        try:
            return self._raw.readline(b"\n")
        except _FAILURES as err:
            raise _transport_error(err) from err

    def read_all(self) -> bytes:
        try:
            return self._raw.read()
        except _FAILURES as err:
            raise _transport_error(err) from err

    def close(self) -> None:
        if self._client is None:
            return
        complete = self._raw.message_complete
        self._raw.release()  # an incomplete body closes the socket: the server sees a disconnect
        self._transport.give_back(self._client, reusable=complete)
        self._client = None


class GeventTransport:
    """Opens streaming POSTs against `base_url` (which may carry a path prefix, e.g. /api)."""

    def __init__(
        self,
        base_url: str,
        *,
        connection_timeout_s: float = 10.0,
        network_timeout_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = URL(base_url)
        self._prefix = self._url.path.rstrip("/")
        self._connection_timeout_s = connection_timeout_s
        self._network_timeout_s = network_timeout_s
        self._clock = clock
        self._idle: list[tuple[HTTPClient, float]] = []  # with when each was given back

    def _client(self) -> HTTPClient:
        """The most recently given back connection if it is fresh enough, else a new one."""
        while self._idle:
            client, since_s = self._idle.pop()
            if self._clock() - since_s < REUSE_IDLE_S:
                return client
            client.close()
            self.close()  # the rest were given back earlier still
        return HTTPClient.from_url(
            self._url,
            concurrency=1,
            connection_timeout=self._connection_timeout_s,
            network_timeout=self._network_timeout_s,
            insecure=True,
        )

    def open(self, path: str, body: bytes, headers: Mapping[str, str]) -> GeventResponse:
        client = self._client()
        try:
            raw = client.request("POST", self._prefix + path, body=body, headers=dict(headers))
        except BaseException as err:
            client.close()  # its one socket may still be checked out: never reuse this client
            if isinstance(err, _FAILURES):
                raise _transport_error(err) from err
            raise
        return GeventResponse(raw, client, self)

    def deadline(self, seconds: float, error: BaseException) -> gevent.Timeout:
        return gevent.Timeout(seconds, error)

    def give_back(self, client: HTTPClient, *, reusable: bool) -> None:
        if reusable:
            self._idle.append((client, self._clock()))
        else:
            client.close()

    @property
    def num_idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        while self._idle:
            self._idle.pop()[0].close()
