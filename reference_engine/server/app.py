"""The ASGI app of one engine process: `create_app(config)`.

    GET  /health   200 while the process serves
    GET  /ready    200 once warm-up (pinned prefixes, for their simulated load time) is done,
                   503 before
    GET  /metrics  Prometheus text (see `metrics.py`); per-tenant families need a key
    /v1/...        the OpenAI-compatible API (`completions.py`)
    /admin/...     the admin API (`admin.py`)

The engine loop starts and stops with the app's lifespan. The HTTP edge (body size and
deadline, HTTP/1.0 framing, and with `http_edge.run` the connection limit and header deadline)
is `http_edge.py`'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import JSONResponse, Response

from reference_engine.clock import Clock
from reference_engine.config import EngineConfig
from reference_engine.core.engine import EngineCore
from reference_engine.server import admin, completions, http_edge
from reference_engine.server.engine_loop import EngineLoop
from reference_engine.server.errors import install_error_handlers
from reference_engine.server.kv_event_publisher import make_publisher
from reference_engine.server.metrics import EngineMetrics
from reference_engine.server.state import ServerState, metrics_with_tenants

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def create_app(
    config: EngineConfig, *, worker: int | None = None, clock: Clock | None = None, kv_events_fd: int | None = None
) -> FastAPI:
    """One engine behind the HTTP API. `worker` is this process's slot in multi-worker mode;
    `kv_events_fd` the socket its supervisor bound for its KV cache events."""
    core = EngineCore(config, clock=clock)
    kv_sink = make_publisher(config.kv_events, worker=worker, fd=kv_events_fd)
    loop = EngineLoop(
        core,
        cancel_propagation=config.server.cancel_propagation,
        orphan_check_interval_s=config.server.orphan_check_interval_s,
        kv_sink=kv_sink,
    )
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
            state.tokenize_pool.close()
            core.close()
            if kv_sink is not None:
                kv_sink.close()

    app = engine_app(
        state,
        lifespan=lifespan,
        title="kvgate reference engine",
        description="OpenAI-compatible API over the kvgate reference engine (docs/server.md)",
    )
    app.include_router(completions.router)
    http_edge.install(app, config.server)
    return app


def engine_app(state: ServerState, **fastapi_args: Any) -> FastAPI:
    """One engine's /health, /ready, /metrics and admin API: all of a whole engine's routes but
    the OpenAI ones (`create_app` adds them), and what each side of a served P/D pair serves as
    a replica (pd_app.py)."""
    app = FastAPI(version="0.1.0", **fastapi_args)
    app.state.kvgate = state
    install_error_handlers(app)
    app.include_router(admin.router)
    loop, config = state.loop, state.config

    @app.get("/health", tags=["ops"])
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/ready", tags=["ops"], responses={503: {"description": "warming up"}})
    async def ready() -> JSONResponse:
        if loop.ready:
            return JSONResponse({"status": "ready", "digest": state.core.digest})
        return JSONResponse({"status": "warming_up"}, status_code=503)

    @app.get("/metrics", tags=["ops"], responses={401: {"description": "server.metrics_key is set and not sent"}})
    async def metrics_text(request: Request) -> Response:
        with_tenants = metrics_with_tenants(request.headers.get("authorization"), config.server)
        loop.pump()
        return Response(state.metrics.render(with_tenants=with_tenants), media_type=PROMETHEUS_TEXT)

    return app
