"""Push cached prefix blocks out of the GPU into a KV tier: `POST /admin/tiers/offload` (admin key only).

    {"tier": "host"}     every cached (unreferenced) prefix block leaves the GPU pool for the host tier
    {"tier": "disk"}     ... and the host tier's blocks go on to the disk

What a tier must keep scoped is what was evicted into it, so the isolation probes
(harness/collectors/tier_probe.py) push their prompt down with this before they ask for it again
as another tenant or salt: vLLM's `/reset_prefix_cache` with an offloading connector does the
same for the GPU tier. The move is the engine's own eviction (`EngineCore.offload_prefix_cache`),
bounded by the tiers' write backlog like any other. Blocks held by requests, sessions or pins
stay. An engine without the tier answers 400 saying which tiers it has.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reference_engine.core.engine import EngineCore
from reference_engine.executors.base import Tier
from reference_engine.server.errors import located_in_body


class TierOffloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: Literal["host", "disk"] = Field(description="the tier the GPU's cached prefix blocks go down to")


OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TierOffloadRequest.model_json_schema()}},
    }
}


def parse(raw: bytes) -> TierOffloadRequest:
    try:
        return TierOffloadRequest.model_validate_json(raw)
    except ValidationError as err:
        raise located_in_body(err) from None


def apply(core: EngineCore, body: TierOffloadRequest) -> dict[str, Any]:
    """Offload; returns the blocks moved and the tiers after it."""
    return {**core.offload_prefix_cache(Tier(body.tier)), **core.tier_state()}
