"""Chaos for the link of a served P/D pair: `POST /admin/pd/chaos` (admin key only).

Any of these, together or alone; what a call leaves out stays as it is:

    {"cancel_every": 4}          abort every 4th transfer the moment it starts: the cancel that
                                 lands mid-transfer, timed to it (0 stops)
    {"link_slowdown": 20}        every transfer from now on 20 times slower (1 restores)
    {"failure_rate": 0.2}        a fifth of the transfers from now on fail (0 stops)
    {"kill_prefill": true}       the prefill engine dies now with what is on it: its prefills
                                 end worker_lost, transfers not landed lose their source

They are the pair's own knobs (`PDCore.cancel_every`, `KvLink.slowdown`, `PDCore.failure_rate`,
`PDCore.lose_prefill`),
the ones the P/D replay turns; the config's `pd.failure_rate` sets the rate at start. The answer
is what chaos holds now and the pair's transfer counts. Bad input is a 400 that says what to
send.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from record.errors import InvalidRequestError
from reference_engine.core.pd import PDCore
from reference_engine.server.errors import located_in_body


class PdChaosRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cancel_every: int | None = Field(None, ge=0, description="abort every n-th transfer as it starts (0 stops)")
    link_slowdown: float | None = Field(None, ge=1, description="each transfer this many times slower (1 restores)")
    failure_rate: float | None = Field(None, ge=0, le=1, description="share of transfers that fail from now on")
    kill_prefill: bool | None = Field(None, description="true: the prefill engine dies now with what is on it")


OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": PdChaosRequest.model_json_schema()}},
    }
}


def parse(raw: bytes) -> PdChaosRequest:
    try:
        return PdChaosRequest.model_validate_json(raw)
    except ValidationError as err:
        raise located_in_body(err) from None


def apply(pd: PDCore, body: PdChaosRequest) -> dict[str, Any]:
    """Make the changes `body` asks for; returns the chaos state and the counts after them."""
    if body.cancel_every is None and body.link_slowdown is None and body.failure_rate is None and not body.kill_prefill:
        raise InvalidRequestError("send at least one of cancel_every, link_slowdown, failure_rate, kill_prefill: true")
    if body.cancel_every is not None:
        pd.cancel_every = body.cancel_every
    if body.link_slowdown is not None:
        pd.link.slowdown = body.link_slowdown
    if body.failure_rate is not None:
        pd.failure_rate = body.failure_rate
    lost = pd.lose_prefill() if body.kill_prefill else 0
    return {"chaos": chaos_state(pd), "pd": pd.counts(), "prefill_requests_lost": lost}


def chaos_state(pd: PDCore) -> dict[str, Any]:
    return {"cancel_every": pd.cancel_every, "link_slowdown": pd.link.slowdown, "failure_rate": pd.failure_rate}
