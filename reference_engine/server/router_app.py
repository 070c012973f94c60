"""The ASGI app of the router process (`kvgate serve --workers N`): same paths as one engine.

    POST /v1/chat/completions, /v1/completions   relayed to a worker (`router.py`)
    GET  /v1/models                               answered here
    GET  /health                                  200 while the router serves
    GET  /ready                                   200 once every worker is ready, else 503 + states
    GET  /metrics                                 the router's own metrics + every worker's, with a
                                                  `worker` label added to theirs (per-tenant
                                                  families only with a key, as one engine)
    GET  /admin/events                            router events + all workers' (merged_events.py)
    GET  /admin/snapshot                          totals over the workers + each worker's snapshot
    GET  /admin/ledger                            the reservation ledger + each worker's ledger
    GET  /admin/config, /admin/workers            the config; pids, ports, states, restarts, each
                                                  worker's KV event subscription and indexed blocks
    POST /admin/router/chaos                      drop or delay KV event batches, restart the prefix
                                                  index (router_chaos.py)

A worker that does not answer an admin or metrics call (it is dead, restarting, or hung: no
answer within `server.worker_hang_timeout_s`) is listed under `unavailable` instead of failing
or holding the whole answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, TypeVar

import httpx
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import JSONResponse, Response

from reference_engine.config import config_digest, redacted
from reference_engine.server import http_edge, router_chaos
from reference_engine.server.app import PROMETHEUS_TEXT
from reference_engine.server.errors import install_error_handlers
from reference_engine.server.merged_events import MERGED_COLUMNS
from reference_engine.server.metrics import render_families, without_tenants
from reference_engine.server.openai_format import models_list
from reference_engine.server.router import Router
from reference_engine.server.snapshots import aggregate_snapshots
from reference_engine.server.state import check_admin_key, metrics_with_tenants
from reference_engine.server.supervisor import WorkerState

T = TypeVar("T")


def _json(resp: httpx.Response) -> dict:
    return resp.json()


def _text(resp: httpx.Response) -> str:
    return resp.text


async def _from_workers(
    router: Router, path: str, read: Callable[[httpx.Response], T]
) -> tuple[dict[int, T], list[int]]:
    """GET `path` from every ready worker, as admin: ({worker: what `read` makes of its answer},
    [workers that did not answer])."""
    headers = {"authorization": f"Bearer {router.config.server.admin_key}"}
    slots = [(s.worker, router.client(s.worker)) for s in router.slots]

    async def one(client: httpx.AsyncClient | None) -> T | None:
        if client is None:
            return None
        resp = await client.get(path, headers=headers, timeout=router.call_timeout)  # a hung worker: unavailable
        resp.raise_for_status()
        return read(resp)

    results = await asyncio.gather(*(one(c) for _, c in slots), return_exceptions=True)
    answers = {
        w: r for (w, _), r in zip(slots, results, strict=True) if r is not None and not isinstance(r, BaseException)
    }
    return answers, [w for w, _ in slots if w not in answers]


def merge_worker_metrics(texts: dict[int, str]) -> list[Metric]:
    """Workers' exposition texts as one set of families, each sample labelled with its worker."""
    families: dict[str, Metric] = {}
    for worker, text in texts.items():
        for family in text_string_to_metric_families(text):
            m = families.get(family.name)
            if m is None:
                m = families[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                m.add_sample(sample.name, {**sample.labels, "worker": str(worker)}, sample.value, sample.timestamp)
    return list(families.values())


def _router_families(router: Router) -> list[Metric]:
    workers = GaugeMetricFamily("kvgate_workers", "Workers by state", labels=["state"])
    for state in WorkerState:
        workers.add_metric([state.value], sum(s.state is state for s in router.slots))
    restarts = CounterMetricFamily("kvgate_worker_restarts", "Worker restarts", labels=["worker"])
    reserved = GaugeMetricFamily("kvgate_router_reserved_blocks", "Blocks reserved on each worker", labels=["worker"])
    for s in router.slots:
        restarts.add_metric([str(s.worker)], s.restarts)
        reserved.add_metric([str(s.worker)], router.ledger.reserved_blocks[s.worker])
    families: list[Metric] = [workers, restarts, reserved]
    if router.kv_events is not None:
        indexed = GaugeMetricFamily(
            "kvgate_router_indexed_blocks", "Prefix blocks the router's index knows on each worker", labels=["worker"]
        )
        batches = CounterMetricFamily(
            "kvgate_router_kv_event_batches",
            "KV event batches from each worker: applied, missed, dropped, delayed, undecodable",
            labels=["worker", "outcome"],
        )
        for s in router.slots:
            indexed.add_metric([str(s.worker)], router.index.num_blocks(s.worker))
            for outcome, n in router.kv_events.counts.get(s.worker, {}).items():
                batches.add_metric([str(s.worker), outcome], n)
        families += [indexed, batches]
    return [
        *families,
        GaugeMetricFamily("kvgate_router_reservations", "Requests holding a reservation", value=len(router.ledger)),
        CounterMetricFamily(
            "kvgate_router_worker_lost_requests",
            "Requests ended by a lost worker",
            value=router.num_worker_lost_requests,
        ),
        CounterMetricFamily("kvgate_router_retries", "Requests retried on another worker", value=router.num_retries),
    ]


def _admin_api(router: Router) -> APIRouter:
    async def check_admin(request: Request) -> None:
        check_admin_key(request.headers.get("authorization"), router.config.server.admin_key)

    api = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(check_admin)])

    def clock() -> dict:
        return {"t_s": router.clock.now(), "engine_clock_offset_unix": router.engine_clock_offset_unix}

    @api.get("/events")
    async def events(
        since: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100_000
    ) -> dict:
        await router.pull_events()
        rows, next_cursor, missed = router.events.page(since, limit)
        return {"columns": MERGED_COLUMNS, "rows": rows, "next_cursor": next_cursor, "missed": missed, **clock()}

    @api.get("/snapshot")
    async def snapshot() -> dict:
        snaps, unavailable = await _from_workers(router, "/admin/snapshot", _json)
        return {
            **aggregate_snapshots(snaps),
            "workers": snaps,
            "unavailable": unavailable,
            "num_reservations": len(router.ledger),
            "reserved_blocks": sum(router.ledger.reserved_blocks),
            **clock(),
        }

    @api.get("/ledger")
    async def ledger() -> dict:
        ledgers, unavailable = await _from_workers(router, "/admin/ledger", _json)
        return {
            "reservations": router.ledger.rows(),
            "reserved_blocks_by_worker": router.ledger.reserved_blocks,
            "workers": ledgers,
            "unavailable": unavailable,
            **clock(),
        }

    @api.get("/config")
    async def config() -> dict:
        return {"config": redacted(router.config), "digest": config_digest(router.config)}

    @api.get("/workers")
    async def workers() -> dict:
        return {
            "workers": [
                {
                    **s.describe(),
                    "reserved_blocks": router.ledger.reserved_blocks[s.worker],
                    "in_flight": router.ledger.num_requests(s.worker),
                    **({} if router.kv_events is None else router.kv_events.describe(s.worker)),
                }
                for s in router.slots
            ],
            "routing": router.policy.name,
        }

    @api.post("/router/chaos", openapi_extra=router_chaos.OPENAPI)
    async def post_router_chaos(request: Request) -> dict:
        """The body is read after the admin check: a caller without the key learns nothing from it."""
        return {**router_chaos.apply(router.kv_events, router_chaos.parse(await request.body())), **clock()}

    return api


def create_router_app(config, *, num_workers: int, log_level: str = "info") -> FastAPI:
    router = Router(config, num_workers, log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await router.start()
        try:
            yield
        finally:
            await router.stop()

    app = FastAPI(
        title="kvgate router",
        version="0.1.0",
        lifespan=lifespan,
        description=f"Router over {num_workers} kvgate engine workers (docs/server.md)",
    )
    app.state.router = router
    install_error_handlers(app)

    @app.post("/v1/chat/completions", tags=["openai"])
    async def chat_completions(request: Request) -> Response:
        return await router.proxy(request, "chat")

    @app.post("/v1/completions", tags=["openai"])
    async def completions(request: Request) -> Response:
        return await router.proxy(request, "text")

    @app.get("/v1/models", tags=["openai"])
    async def models(request: Request) -> dict:
        router.authenticate(request.headers.get("authorization"))
        return models_list(router.model_name, int(router.started_unix), router.memory.model.max_context_tokens)

    @app.get("/health", tags=["ops"])
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/ready", tags=["ops"])
    async def ready() -> JSONResponse:
        states = {s.worker: s.state.value for s in router.slots}
        return JSONResponse(
            {"status": "ready" if router.ready else "not_ready", "workers": states},
            status_code=200 if router.ready else 503,
        )

    @app.get("/metrics", tags=["ops"])
    async def metrics(request: Request) -> Response:
        with_tenants = metrics_with_tenants(request.headers.get("authorization"), config.server)
        texts, _ = await _from_workers(router, "/metrics", _text)
        families = _router_families(router) + merge_worker_metrics(texts)
        return Response(
            render_families(families if with_tenants else without_tenants(families)), media_type=PROMETHEUS_TEXT
        )

    app.include_router(_admin_api(router))
    http_edge.install(app, config.server)
    return app
