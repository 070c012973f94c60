"""The harness's own transport (no gevent): httpx, for the unloaded baseline probe.

It runs in the `kvgate run` process, one request at a time, so it needs no cancels: `deadline`
does nothing, and httpx's own timeouts (set on the client) bound every read instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext

import httpx

from harness.loadgen.exchange import TransportError
from harness.loadgen.outcome import ClientCode


def _transport_error(err: httpx.HTTPError) -> TransportError:
    if isinstance(err, httpx.TimeoutException):
        return TransportError(ClientCode.TIMEOUT, f"timeout: {err}")
    if isinstance(err, httpx.RemoteProtocolError):
        return TransportError(ClientCode.BAD_RESPONSE, f"not an HTTP answer: {err}")
    return TransportError(ClientCode.CONNECTION_ERROR, f"{type(err).__name__}: {err}")


class HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in response.headers.items()}
        self._lines: Iterator[str] | None = None

    def readline(self) -> bytes:
        if self._lines is None:
            self._lines = self._response.iter_lines()
        try:
            return (next(self._lines) + "\n").encode()
        except StopIteration:
            return b""
        except httpx.HTTPError as err:
            raise _transport_error(err) from err

    def read_all(self) -> bytes:
        try:
            return self._response.read()
        except httpx.HTTPError as err:
            raise _transport_error(err) from err

    def close(self) -> None:
        self._response.close()


class HttpxTransport:
    def __init__(self, client: httpx.Client, base_url: str) -> None:
        self._client = client
        self._base = base_url.rstrip("/")

    def open(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpxResponse:
        request = self._client.build_request("POST", self._base + path, content=body, headers=dict(headers))
        try:
            return HttpxResponse(self._client.send(request, stream=True))
        except httpx.HTTPError as err:
            raise _transport_error(err) from err

    def deadline(self, seconds: float, error: BaseException) -> AbstractContextManager[None]:
        return nullcontext()
