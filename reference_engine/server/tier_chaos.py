"""Chaos for the KV tiers of a running engine: `POST /admin/tiers/chaos` (admin key only).

One change per call, on one tier or on the loads:

    {"tier": "disk", "attached": false}        detach the disk (its blocks are gone); true: back, empty
    {"tier": "disk", "read_slowdown": 10}      loads from it at a tenth of its read bandwidth; 1 restores
    {"load_failure_rate": 0.25}                a quarter of the loads from now on fail; 0 stops it

The changes are the engine's own (`TieredCache.detach` / `reattach` / `slow_reads` /
`inject_load_failures`), the ones the engine-level chaos tests make; the config's
`load_failure_rate` sets the same rate at start. The answer is what chaos holds now and the
tiers' usage and counters. Bad input (no tiers, a tier the engine has none of, two changes at
once, a factor below 1, a rate outside [0, 1]) is a 400 that says what to send instead.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from record.errors import InvalidRequestError
from reference_engine.core.engine import EngineCore
from reference_engine.executors.base import Tier
from reference_engine.server.errors import located_in_body


class TierChaosRequest(BaseModel):
    """The body: exactly one of `attached`, `read_slowdown` (with `tier`), `load_failure_rate`."""

    model_config = ConfigDict(extra="forbid")

    tier: Literal["host", "disk"] | None = Field(None, description="the tier `attached` / `read_slowdown` change")
    attached: bool | None = Field(None, description="false detaches the tier, true reattaches it empty")
    read_slowdown: float | None = Field(None, description="divide the tier's read bandwidth by this (1 restores)")
    load_failure_rate: float | None = Field(None, description="share of loads that fail from now on (0 stops)")


# the body as the OpenAPI schema documents it (read by hand, after the admin check)
OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TierChaosRequest.model_json_schema()}},
    }
}


def parse(raw: bytes) -> TierChaosRequest:
    try:
        return TierChaosRequest.model_validate_json(raw)
    except ValidationError as err:
        raise located_in_body(err) from None


def apply(core: EngineCore, body: TierChaosRequest) -> dict[str, Any]:
    """Make the change `body` asks for; returns the chaos state and the tiers after it."""
    tiers = core.tiers
    if tiers is None:
        raise InvalidRequestError(
            "this engine has no KV tiers to disturb: start it with [tiers] host_gib or disk_gib (configs/tiered.toml)"
        )
    changes = [k for k in ("attached", "read_slowdown", "load_failure_rate") if getattr(body, k) is not None]
    if len(changes) != 1:
        raise InvalidRequestError(
            f"send exactly one change per call: attached, read_slowdown or load_failure_rate (got {changes or 'none'})"
        )
    if (changes[0] == "load_failure_rate") != (body.tier is None):
        raise InvalidRequestError(
            "load_failure_rate applies to every load: send it without a tier"
            if body.tier is not None
            else f'{changes[0]} needs the tier it applies to: add "tier": "disk" or "host"',
            param="tier",
        )
    tier = Tier(body.tier) if body.tier is not None else None
    if body.attached is not None and tier is not None:
        (tiers.reattach if body.attached else tiers.detach)(tier)
    elif body.read_slowdown is not None and tier is not None:
        tiers.slow_reads(tier, body.read_slowdown)
    elif body.load_failure_rate is not None:
        tiers.inject_load_failures(body.load_failure_rate)
    return {"chaos": tiers.chaos_state(), **core.tier_state()}
