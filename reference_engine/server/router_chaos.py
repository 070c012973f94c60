"""Chaos for the router's prefix index: `POST /admin/router/chaos` (admin key only).

One change per call:

    {"drop_kv_events": 0.5}       half the KV event batches from the workers are thrown away (0 stops it)
    {"kv_events_delay_s": 2}      every batch is applied 2 s after it arrived (0 stops it)
    {"restart_index": true}       the index emptied, every subscription closed and opened again:
                                  a router that restarted

The index goes stale, or empty, and prefix_aware routes on what it still knows; the workers
keep finding their own prefix hits, so nothing is served wrong, only routed worse. A router
without a prefix index (a policy that reads none, or KV events off) is a 400 that says so.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from record.errors import InvalidRequestError
from reference_engine.server.errors import located_in_body
from reference_engine.server.fleet_kv_events import FleetKvEvents

MAX_DELAY_S = 60.0


class RouterChaosRequest(BaseModel):
    """The body: exactly one of the changes below."""

    model_config = ConfigDict(extra="forbid")

    drop_kv_events: float | None = Field(None, ge=0, le=1, description="share of KV event batches dropped (0 stops)")
    kv_events_delay_s: float | None = Field(
        None, ge=0, le=MAX_DELAY_S, description="seconds each batch waits before it is applied (0 stops)"
    )
    restart_index: bool | None = Field(None, description="true: empty the index and reopen the subscriptions")


OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": RouterChaosRequest.model_json_schema()}},
    }
}


def parse(raw: bytes) -> RouterChaosRequest:
    try:
        return RouterChaosRequest.model_validate_json(raw)
    except ValidationError as err:
        raise located_in_body(err) from None


def apply(kv_events: FleetKvEvents | None, body: RouterChaosRequest) -> dict[str, Any]:
    """Make the change; returns what chaos holds now."""
    if kv_events is None:
        raise InvalidRequestError(
            'this router keeps no prefix index: start it with [server] routing = "prefix_aware" and '
            "[kv_events] enable_kv_cache_events = true (configs/fleet.toml)"
        )
    changes = [k for k, v in body.model_dump().items() if v is not None]
    if len(changes) != 1:
        raise InvalidRequestError(
            "send exactly one change per call: drop_kv_events, kv_events_delay_s or restart_index "
            f"(got {changes or 'none'})"
        )
    if body.drop_kv_events is not None:
        kv_events.chaos.drop_fraction = body.drop_kv_events
    elif body.kv_events_delay_s is not None:
        kv_events.chaos.delay_s = body.kv_events_delay_s
    elif body.restart_index:
        kv_events.restart()
    return {
        "chaos": {"drop_kv_events": kv_events.chaos.drop_fraction, "kv_events_delay_s": kv_events.chaos.delay_s},
        "index_restarts": kv_events.num_restarts,
    }
