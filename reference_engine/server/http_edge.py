"""The HTTP edge of every kvgate server process (one engine, the router, each worker): what a
slow, greedy or old client may not do to it, and how the process listens.

    connection limit   `server.max_connections` open connections; the next one is answered
                       503 too_many_connections and closed before its request is read
    header deadline    a connection must send a whole request line and headers within
                       `server.header_timeout_s` of opening (or of starting a request on a
                       kept-alive connection): else 408 request_timeout and close
    body deadline      a body must arrive whole within `server.body_timeout_s` of its headers:
                       else 408 request_timeout, `connection: close`
    body size          over `server.max_body_bytes`, declared or streamed: 413 (`BodyGuard`)
    HTTP/1.0           a 1.0 client cannot read chunked encoding, so its response is sent whole
                       with a Content-Length (a stream arrives at its end) (`WholeForHttp10`)

The two deadlines and the limit live in the HTTP protocol (`GuardedHttpProtocol`, uvicorn's
httptools protocol with timers): before the headers are complete there is no ASGI request to
time. The body deadline and size are ASGI middleware, so their refusals are the API's own
OpenAI-shape errors. Each refusal logs one line, never a traceback.

`listen` binds the address itself, so a busy port is a `StartupError` with one plain line
(`kvgate serve` exits 2), not uvicorn's exit 3; `run` serves an app on a bound socket.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from record.errors import (
    OverloadedError,
    PayloadTooLargeError,
    RequestError,
    RequestTimeoutError,
    StartupError,
)
from reference_engine.config.engine_config import ServerConfig

log = logging.getLogger("kvgate.http")

BACKLOG = 2048  # uvicorn's own default for the sockets it binds
_STATUS_TEXT = {408: b"Request Timeout", 503: b"Service Unavailable"}


def _raw_error(err: RequestError) -> bytes:
    """A whole HTTP/1.1 error response with `connection: close`, for the protocol layer."""
    body = json.dumps(err.to_openai()).encode()
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % (err.status, _STATUS_TEXT[err.status], len(body))
        + body
    )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the connection limit and the header deadline. The
    timer is armed when a connection opens and when a request begins, disarmed when its headers
    are complete or the connection goes; O(1) per request."""

    def __init__(self, *args: Any, limits: ServerConfig, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            log.warning(
                "refused a connection from %s: %d connections are open (server.max_connections)",
                _peer(self.client),
                len(self.connections) - 1,
            )
            self._refuse(
                OverloadedError(
                    f"the server holds server.max_connections ({self.limits.max_connections}) "
                    f"connections; retry shortly",
                    retry_after_s=1.0,
                )
            )
            return
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        log.info(
            "closed a connection from %s: no whole request headers within %g s (server.header_timeout_s)",
            _peer(self.client),
            self.limits.header_timeout_s,
        )
        self._refuse(
            RequestTimeoutError(
                f"no whole request line and headers within server.header_timeout_s ({self.limits.header_timeout_s:g} s)"
            )
        )

    def _refuse(self, err: RequestError) -> None:
        """Answer `err` and close; only close when a response is still being written on this
        connection (a pipelined request came in slowly behind it): bytes of ours would corrupt it."""
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(_raw_error(err))
        self.transport.close()


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown peer"


class BodyGuard:
    """Pure ASGI middleware: the body's size and deadline (see the module docstring).

    A declared Content-Length over the limit is refused before the app runs. A chunked body that
    grows past it is cut short for the app, and whatever the app then answers (a 400 for the
    truncated JSON) is replaced by the 413. A body still incomplete at its deadline makes the
    app's `receive()` raise `RequestTimeoutError`, which the app answers as any RequestError;
    that answer closes the connection."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send)
                return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        seen, over, complete, late = 0, False, False, False

        async def guarded_receive() -> Message:
            nonlocal seen, over, complete, late
            if complete:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                late = True
                log.info(
                    "%s %s: the body was not complete within %g s (server.body_timeout_s); closing",
                    scope["method"],
                    scope["path"],
                    self.timeout_s,
                )
                raise RequestTimeoutError(
                    f"the request body did not arrive within server.body_timeout_s ({self.timeout_s:g} s)"
                ) from None
            if message["type"] != "http.request":
                return message
            complete = not message.get("more_body", False)
            if not over:
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = complete = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Message) -> None:
            if over:
                if message["type"] == "http.response.start":
                    await self._refuse(send)
                return
            if late and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, guarded_receive, guarded_send)

    async def _refuse(self, send: Send) -> None:
        err = PayloadTooLargeError(
            f"the request body is larger than server.max_body_bytes ({self.max_bytes} bytes); send a shorter prompt"
        )
        await send(
            {"type": "http.response.start", "status": err.status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": json.dumps(err.to_openai()).encode()})


class WholeForHttp10:
    """Pure ASGI middleware: an HTTP/1.0 request's response is collected and sent whole, with a
    Content-Length (uvicorn would frame a response of unknown length as chunked, which 1.0
    does not have). Other versions pass through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("http_version") != "1.0":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        parts: list[bytes] = []

        async def whole_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            parts.append(message.get("body", b""))
            if message.get("more_body", False) or start is None:
                return
            body = b"".join(parts)
            headers = [
                (k, v)
                for k, v in start.get("headers", [])
                if k.lower() not in (b"content-length", b"transfer-encoding")
            ]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, whole_send)


def install(app: FastAPI, server: ServerConfig) -> None:
    """Put the ASGI half of the edge (body size and deadline, HTTP/1.0 framing) around `app`."""
    app.add_middleware(BodyGuard, max_bytes=server.max_body_bytes, timeout_s=server.body_timeout_s)
    app.add_middleware(WholeForHttp10)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; a busy (or forbidden) address is a StartupError."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=BACKLOG)
    except OSError as err:
        raise StartupError(
            f"cannot listen on {host}:{port}: {err.strerror or err}; is another server running "
            f"there? Stop it or pick another --port"
        ) from None


def run(app: ASGIApp, server: ServerConfig, sock: socket.socket, *, log_level: str, access_log: bool) -> None:
    """Serve `app` on `sock` until interrupted, with the protocol half of the edge."""
    config = uvicorn.Config(
        app,
        http=functools.partial(GuardedHttpProtocol, limits=server),  # type: ignore[arg-type]
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run(sockets=[sock])
