"""The ASGI app of one engine process: `create_app(config)`.

    GET  /health   200 while the process serves
    GET  /ready    200 once warm-up (pinned prefixes, for their simulated load time) is done,
                   503 before
    GET  /metrics  Prometheus text (see `metrics.py`)
    /v1/...        the OpenAI-compatible API (`completions.py`)
    /admin/...     the admin API (`admin.py`)

The engine loop starts and stops with the app's lifespan. Bodies larger than
`server.max_body_bytes` are refused with 413 before any JSON is parsed (`BodyLimit`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_engine.clock import Clock
from reference_engine.config import EngineConfig
from reference_engine.core.engine import EngineCore
from reference_engine.errors import PayloadTooLargeError
from reference_engine.server import admin, completions
from reference_engine.server.engine_loop import EngineLoop
from reference_engine.server.errors import install_error_handlers
from reference_engine.server.metrics import EngineMetrics
from reference_engine.server.state import ServerState

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class BodyLimit:
    """Pure ASGI middleware: 413 for bodies over `max_bytes`, declared or streamed.

    A declared Content-Length over the limit is refused before the app runs. A chunked body
    that grows past it is cut short for the app, and whatever the app then answers (a 400 for
    the truncated JSON) is replaced by the 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send)
                return
        seen = 0
        over = False

        async def limited_receive() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request" and not over:
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Message) -> None:
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                await self._refuse(send)

        await self.app(scope, limited_receive, guarded_send)

    async def _refuse(self, send: Send) -> None:
        err = PayloadTooLargeError(f"the request body is larger than server.max_body_bytes ({self.max_bytes} "
                                   f"bytes); send a shorter prompt")
        await send({"type": "http.response.start", "status": err.status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(err.to_openai()).encode()})


def create_app(config: EngineConfig, *, worker: int | None = None, clock: Clock | None = None) -> FastAPI:
    """One engine behind the HTTP API. `worker` is this process's slot in multi-worker mode."""
    core = EngineCore(config, clock=clock)
    loop = EngineLoop(core, cancel_propagation=config.server.cancel_propagation,
                      orphan_check_interval_s=config.server.orphan_check_interval_s)
    model_name = config.server.served_model_name or config.model.name
    metrics = EngineMetrics(core, model_name)
    loop.add_observer(metrics)
    state = ServerState(config=config, core=core, loop=loop, metrics=metrics, worker=worker)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await loop.start()
        try:
            yield
        finally:
            await loop.stop()

    app = FastAPI(title="kvgate reference engine", version="0.1.0", lifespan=lifespan,
                  description="OpenAI-compatible API over the kvgate reference engine (docs/server.md)")
    app.state.kvgate = state
    install_error_handlers(app)
    app.include_router(completions.router)
    app.include_router(admin.router)

    @app.get("/health", tags=["ops"])
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/ready", tags=["ops"], responses={503: {"description": "warming up"}})
    async def ready() -> JSONResponse:
        if loop.ready:
            return JSONResponse({"status": "ready", "digest": core.digest})
        return JSONResponse({"status": "warming_up"}, status_code=503)

    @app.get("/metrics", tags=["ops"])
    async def metrics_text() -> Response:
        loop.pump()
        return Response(metrics.render(), media_type=PROMETHEUS_TEXT)

    app.add_middleware(BodyLimit, max_bytes=config.server.max_body_bytes)
    return app
