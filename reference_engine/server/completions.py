"""The OpenAI-compatible routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models.

A completion request is checked in this order, each failure a typed error with an OpenAI body:
API key (401) -> body shape (400, via the pydantic models) -> model name (404) -> the engine's
admission (400 context_length_exceeded, 410 context_expired, 429 kv_capacity / tenant_quota).
A long prompt meets admission twice: first on its token count alone, before it is tokenized (a
refusal then costs no tokenizing and never waits behind other prompts' tokenizing), then with its
token ids, which the tokenizer process makes off the event loop.
Priority is the tenant's configured class alone: headers such as `X-Priority` are never read.

The server names every request itself (`ServerState.new_request_id`): a client can never pick,
guess or occupy an engine request id. A client's `X-Request-Id` is kept as a label of its own
request (`client_request_id`: in the engine's events and the ledger, echoed in
`x-client-request-id`), never used as a key, so two tenants, or two requests of one tenant, may
send the same label. Only a router holding the admin key names a request for the worker it
forwards to (`X-Kvgate-Request-Id`, `state.forwarded_request_id`), so that its reservation and
the worker's events carry one id. Session headers: `X-Session-Id` keeps a conversation's KV
between turns (scoped to the tenant); `X-Session-Rebuildable: false` declares that the client
cannot resend the context, so an evicted session answers 410 instead of being re-prefilled.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.datastructures import Headers

from record.errors import InvalidRequestError
from reference_engine.core.tenants import TenantState
from reference_engine.server.completion_response import CompletionResponse
from reference_engine.server.engine_loop import RequestStream
from reference_engine.server.errors import located_in_body
from reference_engine.server.openai_format import Kind, ResponseFormat, models_list
from reference_engine.server.protocol import ChatCompletionRequest, CompletionRequest
from reference_engine.server.state import ServerState, session_rebuildable

Body = TypeVar("Body", ChatCompletionRequest, CompletionRequest)
LONG_PROMPT_CHARS = 16_384  # prompts from this long (≈ 2K words) are judged by count, tokenized off the loop
_bearer = HTTPBearer(auto_error=False, description="a tenant API key from the engine config")
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": what}
    for code, what in (
        (400, "malformed input or context_length_exceeded"),
        (401, "unknown API key"),
        (404, "unknown model"),
        (410, "context_expired: the session's KV is gone and it is not rebuildable"),
        (413, "body too large"),
        (429, "kv_capacity, tenant_quota or queue_deadline, with Retry-After"),
        (503, "out_of_memory or worker_lost"),
    )
}


def _state(request: Request) -> ServerState:
    return request.app.state.kvgate


async def _tenant(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> TenantState:
    return _state(request).authenticate(request.headers.get("authorization"))


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# The optional headers, read by hand; documented here for the OpenAPI schema.
_HEADER_DOCS = [
    {
        "name": "X-Session-Id",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "maxLength": 256},
        "description": "keeps this conversation's KV between turns",
    },
    {
        "name": "X-Session-Rebuildable",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "enum": ["true", "false"]},
        "description": "'false': answer 410 rather than re-prefill an evicted session",
    },
    {
        "name": "X-Request-Id",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "pattern": _REQUEST_ID.pattern},
        "description": "the client's label for this request (kept in the engine's events, echoed back); the "
        "engine's own id is the response's x-request-id",
    },
]


def _session_and_request_ids(headers: Headers) -> tuple[str | None, str | None]:
    """(X-Session-Id, the client's X-Request-Id label), each checked."""
    session_id, label = headers.get("x-session-id") or None, headers.get("x-request-id")
    if session_id is not None and len(session_id) > 256:
        raise InvalidRequestError("X-Session-Id is longer than 256 characters", param="X-Session-Id")
    if label is not None and not _REQUEST_ID.fullmatch(label):
        raise InvalidRequestError(f"X-Request-Id must match {_REQUEST_ID.pattern}", param="X-Request-Id")
    return session_id, label


def _inline_schema(model: type[BaseModel]) -> dict[str, object]:
    """The model's JSON schema with its `$defs` inlined, to document a body read by hand."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve_object(node: dict[str, object]) -> dict[str, object]:
        if "$ref" in node:
            return resolve_object(defs[str(node["$ref"]).rsplit("/", 1)[-1]])
        return {k: resolve(v) for k, v in node.items()}

    def resolve(node: object) -> object:
        if isinstance(node, dict):
            return resolve_object(node)
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve_object(schema)


def _openapi(model: type[BaseModel]) -> dict:
    return {
        "parameters": _HEADER_DOCS,
        "security": [{"HTTPBearer": []}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": _inline_schema(model)}}},
    }


def _parse(model: type[Body], raw: bytes) -> Body:
    try:
        return model.model_validate_json(raw)
    except ValidationError as err:
        raise located_in_body(err) from None


AuthenticatedTenant = Annotated[TenantState, Depends(_tenant)]  # the caller, from its API key
router = APIRouter(tags=["openai"])


async def _start(request: Request, kind: Kind, model: type[Body]) -> CompletionResponse:
    """Check and submit one completion request, in the order the module docstring gives."""
    state = _state(request)
    tenant = state.authenticate(request.headers.get("authorization"))
    body = _parse(model, await request.body())
    state.check_model(body.model)
    session_id, label = _session_and_request_ids(request.headers)
    rebuild_ok = session_rebuildable(request.headers.get("x-session-rebuildable"), tenant.config)
    request_id = state.forwarded_request_id(request.headers) or state.new_request_id(kind)
    request.state.request_id = request_id
    submit = functools.partial(
        state.loop.submit,
        tenant=tenant.name,
        max_new_tokens=body.max_new_tokens(),
        session_id=session_id,
        session_rebuildable=rebuild_ok,
        streaming=body.stream,
        request_id=request_id,
        client_request_id=label,
        cache_salt=body.cache_salt,
    )
    text = body.prompt_text()
    if text is None or len(text) < LONG_PROMPT_CHARS:
        stream = submit(prompt_token_ids=body.prompt_token_ids(state.core.tokenizer))
    else:
        stream = await _submit_long(
            state,
            text,
            submit,
            tenant.name,
            session_id=session_id,
            max_new_tokens=body.max_new_tokens(),
            request_id=request_id,
            label=label,
        )
    fmt = ResponseFormat(kind, request_id, body.model, int(time.time()), body.include_usage)
    return CompletionResponse(state.loop, stream, fmt, state.core.tokenizer, state.pieces, state.worker)


async def _submit_long(
    state: ServerState,
    text: str,
    submit: Callable[..., RequestStream],
    tenant: str,
    *,
    session_id: str | None,
    max_new_tokens: int | None,
    request_id: str,
    label: str | None,
) -> RequestStream:
    """Submit a long prompt. It is first judged by admission on its token count
    (`Tokenizer.min_tokens`, a fraction of the cost of its ids), so that a refusal answers before
    any tokenizing; then it is tokenized in the tokenizer process (`tokenize_pool.py`), so that a
    burst of long prompts never holds the event loop (and every stream on it) for the
    milliseconds each one takes. A tenant's long prompts pass one at a time (`intake_lock`): the
    count check of the next one then sees the reservation of the one before, instead of letting
    a whole burst through to the tokenizer only to refuse it after."""
    async with state.intake_lock(tenant):
        if session_id is None:  # a session turn may reuse its session's blocks: add_request judges it
            state.core.refuse_early(
                tenant=tenant,
                min_prompt_tokens=state.core.tokenizer.min_tokens(text),
                max_new_tokens=max_new_tokens,
                request_id=request_id,
                client_request_id=label,
            )
        return submit(prompt_token_ids=await state.tokenize_pool.encode(text))


# The hot endpoints read their body and headers by hand: FastAPI's parameter machinery cost more
# than all the rest of a request's intake. `openapi_extra` documents what they read.
@router.post("/v1/chat/completions", responses=_ERRORS, openapi_extra=_openapi(ChatCompletionRequest))
async def chat_completions(request: Request) -> CompletionResponse:
    return await _start(request, "chat", ChatCompletionRequest)


@router.post("/v1/completions", responses=_ERRORS, openapi_extra=_openapi(CompletionRequest))
async def completions(request: Request) -> CompletionResponse:
    return await _start(request, "text", CompletionRequest)


@router.get("/v1/models", responses={401: _ERRORS[401]})
async def models(request: Request, tenant: AuthenticatedTenant) -> dict:
    state = _state(request)
    return models_list(state.model_name, int(state.started_unix), state.core.memory.model.max_context_tokens)
