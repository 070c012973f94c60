"""The ASGI app of a served P/D pair (`kvgate serve` with `[pd] enabled`): one process, the pair's
two engines on one clock (pd_loop.py), each also served as a replica of its own.

    POST /v1/chat/completions, /v1/completions  prefill side, hand-off, decode side: one answer
    GET  /v1/models, /health                    as one engine
    GET  /ready                                 200 once both sides are warm, else 503
    GET  /metrics                               both sides' families labelled role="prefill" /
                                                "decode", and the link's (pd_metrics.py)
    GET  /admin/events                          both sides' events and the pair's transfers,
                                                each naming its worker (0 prefill, 1 decode)
    GET  /admin/snapshot                        the two pools summed, each side's (`workers`),
                                                `pd`: the transfers and any stranded reservation
    GET  /admin/ledger                          the reservations between the sides + each side's ledger
    GET  /admin/config, /admin/workers          the config; the two sides, each at its `path`
    POST /admin/pd/chaos                        cancel, slow or fail transfers (pd_chaos.py)
    /replicas/prefill/..., /replicas/decode/... each side's /health, /ready, /metrics and admin
                                                API as one engine serves them (no OpenAI routes):
                                                where the harness reads each pool as a replica

A request id is the pair's: both sides and the transfer carry it, so one id follows a request
through the hand-off in every event.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from starlette.responses import JSONResponse, Response

from reference_engine.clock import Clock, MonotonicClock
from reference_engine.config import EngineConfig, config_digest, redacted
from reference_engine.core.ledger import ledger
from reference_engine.core.pd import ROLES, PDCore, PdState
from reference_engine.server import completions, http_edge, pd_chaos
from reference_engine.server.app import PROMETHEUS_TEXT, engine_app
from reference_engine.server.errors import install_error_handlers
from reference_engine.server.merged_events import MERGED_COLUMNS
from reference_engine.server.metrics import EngineMetrics, render_families, without_tenants
from reference_engine.server.pd_loop import WORKER, PdLoop
from reference_engine.server.pd_metrics import pd_families
from reference_engine.server.snapshots import aggregate_snapshots, engine_snapshot
from reference_engine.server.state import ServerState, check_admin_key, metrics_with_tenants

REPLICAS_PATH = "/replicas"


def create_pd_app(config: EngineConfig, *, clock: Clock | None = None) -> FastAPI:
    """The pair `config` describes behind the HTTP API (module docstring)."""
    pd = PDCore(config, clock=clock or MonotonicClock())
    loop = PdLoop(
        pd,
        cancel_propagation=config.server.cancel_propagation,
        orphan_check_interval_s=config.server.orphan_check_interval_s,
    )
    model_name = config.server.served_model_name or config.model.name
    sides: dict[str, ServerState] = {}
    for role in ROLES:
        core, side_loop = pd.sides[role].core, loop.sides[role]
        metrics = EngineMetrics(core, model_name)
        side_loop.add_observer(metrics)
        sides[role] = ServerState(config=core.config, core=core, loop=side_loop, metrics=metrics, worker=WORKER[role])
    state = ServerState(config=config, core=pd.prefill, loop=loop, metrics=sides["decode"].metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await loop.start()
        try:
            yield
        finally:
            await loop.stop()
            state.tokenize_pool.close()
            pd.close()

    app = FastAPI(
        title="kvgate reference engine: P/D pair",
        version="0.1.0",
        lifespan=lifespan,
        description="OpenAI-compatible API over a disaggregated prefill/decode pair (docs/pd.md)",
    )
    app.state.kvgate = state
    install_error_handlers(app)
    app.include_router(completions.router)
    app.include_router(_admin_api(config, pd, loop, sides))
    for role, side in sides.items():
        app.mount(f"{REPLICAS_PATH}/{role}", engine_app(side, title=f"kvgate P/D pair: the {role} side"))

    @app.get("/health", tags=["ops"])
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/ready", tags=["ops"], responses={503: {"description": "warming up"}})
    async def ready() -> JSONResponse:
        if loop.ready:
            return JSONResponse({"status": "ready", "digest": config_digest(config)})
        return JSONResponse({"status": "warming_up"}, status_code=503)

    @app.get("/metrics", tags=["ops"], responses={401: {"description": "server.metrics_key is set and not sent"}})
    async def metrics_text(request: Request) -> Response:
        with_tenants = metrics_with_tenants(request.headers.get("authorization"), config.server)
        loop.pump()
        families = pd_families(pd, {role: list(side.metrics.registry.collect()) for role, side in sides.items()})
        return Response(
            render_families(families if with_tenants else without_tenants(families)), media_type=PROMETHEUS_TEXT
        )

    http_edge.install(app, config.server)
    return app


def _admin_api(config: EngineConfig, pd: PDCore, loop: PdLoop, sides: dict[str, ServerState]) -> APIRouter:
    async def check_admin(request: Request) -> None:
        check_admin_key(request.headers.get("authorization"), config.server.admin_key)

    api = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(check_admin)])

    def clock() -> dict:
        return {"t_s": pd.now(), "engine_clock_offset_unix": loop.engine_clock_offset_unix}

    @api.get("/events")
    async def events(
        since: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100_000
    ) -> dict:
        loop.pump()
        rows, next_cursor, missed = loop.events.page(since, limit)
        return {"columns": MERGED_COLUMNS, "rows": rows, "next_cursor": next_cursor, "missed": missed, **clock()}

    @api.get("/snapshot")
    async def snapshot() -> dict:
        snaps = {WORKER[role]: engine_snapshot(side.core, side.loop.num_open_streams) for role, side in sides.items()}
        in_between = [r for r in pd.requests.values() if r.state in (PdState.RESERVING, PdState.TRANSFERRING)]
        return {
            **aggregate_snapshots(snaps),
            "num_open_streams": loop.num_open_streams,
            "workers": snaps,
            "unavailable": [],
            "num_reservations": len(in_between),
            "reserved_blocks": sum(len(r.reservation) for r in in_between),
            "pd": pd.counts(),
            "pd_chaos": pd_chaos.chaos_state(pd),
            **clock(),
        }

    @api.get("/ledger")
    async def get_ledger(max_rows: Annotated[int, Query(ge=1, le=100_000)] = 1000) -> dict:
        reservations = [
            {
                "request_id": r.request_id,
                "tenant": r.tenant,
                "state": r.state.value,
                "source_blocks": len(r.source_blocks),
                "reserved_blocks": len(r.reservation),
            }
            for r in pd.requests.values()
            if r.source_blocks or r.reservation
        ]
        return {
            "reservations": reservations[:max_rows],
            "workers": {WORKER[role]: ledger(side.core, max_rows) for role, side in sides.items()},
            "unavailable": [],
            **clock(),
        }

    @api.get("/config")
    async def get_config() -> dict:
        return {"config": redacted(config), "digest": config_digest(config)}

    @api.get("/workers")
    async def workers() -> dict:
        return {
            "workers": [
                {
                    "worker": WORKER[role],
                    "role": role,
                    "path": f"{REPLICAS_PATH}/{role}",
                    "pid": os.getpid(),
                    "state": "ready" if side.loop.ready else "warming_up",
                    "in_flight": side.loop.num_open_streams,
                    "step_errors": side.loop.num_step_errors,
                    "kv_events_endpoint": None,
                }
                for role, side in sides.items()
            ],
            "routing": "pd",
        }

    @api.post("/pd/chaos", openapi_extra=pd_chaos.OPENAPI)
    async def post_pd_chaos(request: Request) -> dict:
        """The body is read after the admin check: a caller without the key learns nothing from it."""
        answer = pd_chaos.apply(pd, pd_chaos.parse(await request.body()))
        for side in loop.sides.values():  # what the change ended is answered now
            side.wake()
        loop.pump_pair()
        return {**answer, **clock()}

    return api
