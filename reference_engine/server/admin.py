"""The admin API of one engine process, behind `Authorization: Bearer <server.admin_key>`.

    GET /admin/ledger              who holds which pages: requests, sessions, tenants, pool
    GET /admin/events?since=&limit= events after a cursor, as columns + rows, with next_cursor
                                   and how many a slow reader `missed` (the log is a ring)
    GET /admin/snapshot            usage now (the harness's sampler reads this)
    GET /admin/kv_events/snapshot  every block its KV cache events announced and did not take back,
                                   as one msgpack batch (kv_event_wire.py); `x-kvgate-kv-seq`: the
                                   number of the last batch it reflects (404: events are off)
    GET /admin/config              the validated config (secrets redacted) and its digest
    GET /admin/workers             this process as the only worker: pid, state, where its KV
                                   cache events are published (kv_events_endpoint)
    POST /admin/tiers/chaos        detach / reattach a KV tier, slow its reads, inject load
                                   failures (tier_chaos.py): chaos testing of the tiers
    POST /admin/tiers/offload      push the GPU's cached prefix blocks down to a tier
                                   (tier_offload.py): the isolation probes' hook

Engine times (`t_s`, event times) are engine-clock seconds; every answer also carries
`engine_clock_offset_unix`, the wall unix time at engine time 0, to align them with client
wall times. In multi-worker mode the router serves the same paths over all workers.
"""

from __future__ import annotations

import os
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from record.errors import NotFoundError
from record.events import WORKER_EVENT_COLUMNS
from reference_engine.config import redacted
from reference_engine.core.ledger import ledger
from reference_engine.server import tier_chaos, tier_offload
from reference_engine.server.snapshots import engine_snapshot
from reference_engine.server.state import ServerState

EVENTS_COLUMNS = WORKER_EVENT_COLUMNS
KV_SEQ_HEADER = "x-kvgate-kv-seq"


def _state(request: Request) -> ServerState:
    return request.app.state.kvgate


async def _admin(request: Request) -> ServerState:
    state = _state(request)
    state.check_admin(request.headers.get("authorization"))
    return state


Admin = Annotated[ServerState, Depends(_admin)]
router = APIRouter(prefix="/admin", tags=["admin"])


def _clock(state: ServerState) -> dict:
    return {
        "t_s": state.core.clock.now(),
        "engine_clock_offset_unix": state.loop.engine_clock_offset_unix,
        "worker": state.worker,
    }


@router.get("/ledger")
async def get_ledger(state: Admin, max_rows: Annotated[int, Query(ge=1, le=100_000)] = 1000) -> dict:
    return {**ledger(state.core, max_rows), **_clock(state)}


@router.get("/events")
async def get_events(
    state: Admin, since: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100_000
) -> dict:
    state.loop.pump()
    page = state.core.events.since(since, limit)
    worker = state.worker
    rows = [[*e.to_row().values(), worker] for e in page.events]
    return {
        "columns": EVENTS_COLUMNS,
        "rows": rows,
        "next_cursor": page.next_cursor,
        "missed": page.missed,
        **_clock(state),
    }


@router.get("/snapshot")
async def get_snapshot(state: Admin) -> dict:
    return {**engine_snapshot(state.core, state.loop.num_open_streams), **_clock(state)}


@router.get("/kv_events/snapshot", response_class=Response)
async def get_kv_events_snapshot(state: Admin) -> Response:
    state.loop.pump()  # what the engine did so far is published first: the snapshot's number covers it
    sink = state.loop.kv_sink
    snap = None if sink is None else sink.snapshot()
    if snap is None:
        raise NotFoundError("this engine publishes no KV cache events ([kv_events] enable_kv_cache_events, zmq)")
    seq, payload = snap
    return Response(payload, media_type="application/msgpack", headers={KV_SEQ_HEADER: str(seq)})


@router.get("/config")
async def get_config(state: Admin) -> dict:
    return {"config": redacted(state.config), "digest": state.core.digest}


@router.get("/workers")
async def get_workers(state: Admin) -> dict:
    return {
        "workers": [
            {
                "worker": state.worker,
                "pid": os.getpid(),
                "state": "ready" if state.loop.ready else "warming_up",
                "in_flight": state.loop.num_open_streams,
                "step_errors": state.loop.num_step_errors,
                "kv_events_endpoint": None if state.loop.kv_sink is None else state.loop.kv_sink.endpoint,
            }
        ]
    }


@router.post("/tiers/chaos", openapi_extra=tier_chaos.OPENAPI)
async def post_tier_chaos(state: Admin, request: Request) -> dict:
    """The body is read after the admin check: a caller without the key learns nothing from it."""
    body = tier_chaos.parse(await request.body())
    return {**tier_chaos.apply(state.core, body), **_clock(state)}


@router.post("/tiers/offload", openapi_extra=tier_offload.OPENAPI)
async def post_tier_offload(state: Admin, request: Request) -> dict:
    """The body is read after the admin check, as for chaos."""
    body = tier_offload.parse(await request.body())
    return {**tier_offload.apply(state.core, body), **_clock(state)}
