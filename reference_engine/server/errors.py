"""Every error the server sends is OpenAI's JSON error shape; nothing else ever leaves it.

    RequestError (the engine's typed errors)      -> its status, {"error": {message, type, param, code}}
    RequestValidationError (pydantic, bad JSON)   -> 400 invalid_request, naming the field and the fix
    HTTPException (unknown route, wrong method)   -> 404 not_found / 405 method_not_allowed
    ClientDisconnect (gone mid-upload)            -> one log line; nothing to answer
    anything else                                 -> 500 internal_error (logged with its traceback;
                                                     the client sees a message and the request id)

429s (and 503s that know when to retry) carry `Retry-After` (whole seconds); every error for
which the engine had a request id carries it in `x-request-id`, so a rejected request can be
joined to its engine events.
"""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from record.errors import (
    CapacityError,
    InvalidRequestError,
    NotFoundError,
    OutOfMemoryError,
    RequestError,
    WorkerLostError,
)
from reference_engine.request import FinishReason
from reference_engine.request import Request as EngineRequest

log = logging.getLogger("kvgate.server")


def error_response(
    err: RequestError, request_id: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    out = dict(headers or {})
    if request_id is not None:
        out["x-request-id"] = request_id
    if err.status == 429 or err.retry_after_s is not None:
        out["retry-after"] = str(max(1, math.ceil(err.retry_after_s or 1)))
    return JSONResponse(err.to_openai(), status_code=err.status, headers=out)


def finish_error(r: EngineRequest) -> RequestError:
    """The error a request that ended without completing answers with."""
    reason = r.finish_reason
    if reason is FinishReason.REJECTED:
        waited = (r.finish_s or r.arrival_s) - r.arrival_s
        return CapacityError(
            f"the request waited {waited:.1f} s in the admission queue without getting KV memory "
            f"(admission.queue_deadline_ms, batch_queue_deadline_ms for batch); retry after the "
            f"Retry-After delay",
            code="queue_deadline",
            retry_after_s=1.0,
        )
    if reason is FinishReason.OOM:
        return OutOfMemoryError(
            "the engine ran out of KV memory for this request and had nothing to preempt "
            "(the policy has no admission or preemption); retry later"
        )
    if reason is FinishReason.PREEMPTED:
        return OutOfMemoryError(
            "the engine aborted this request to free KV memory (preemption.mode = kill); retry it", code="preempted"
        )
    if reason is FinishReason.CANCELLED:
        return WorkerLostError("the request was cancelled inside the engine", code="cancelled")
    return WorkerLostError(f"the engine lost this request: {r.finish_detail or 'unknown cause'}; retry it")


def _validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    problems, param = [], None
    for e in err.errors():
        loc = [str(p) for p in e.get("loc", ()) if p != "body"]
        if e.get("type") == "json_invalid":
            return (
                f"the request body is not valid JSON ({e.get('ctx', {}).get('error', 'parse error')}); "
                f"send a JSON object with Content-Type: application/json"
            ), None
        where = ".".join(loc) or "body"
        param = param or (loc[0] if loc else None)
        shown = e.get("input")
        got = "" if e.get("type") == "missing" else f" (got {shown!r:.60})"
        problems.append(f"{where}: {e.get('msg', 'invalid')}{got}")
    return "invalid request: " + "; ".join(problems[:5]), param


def located_in_body(err: ValidationError) -> RequestValidationError:
    """A body model's errors as FastAPI reports a body's, for endpoints that parse their body by
    hand (after their auth check, or for speed): the handler below answers them as 400."""
    return RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in err.errors()])


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestError)
    async def _request_error(request: Request, err: RequestError) -> JSONResponse:
        return error_response(err, getattr(request.state, "request_id", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, err: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(err)
        return error_response(InvalidRequestError(message, param=param))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException) -> JSONResponse:
        if err.status_code == 404:
            return error_response(
                NotFoundError(
                    f"no route {request.method} {request.url.path}; see GET /docs for the API", code="not_found"
                )
            )
        e = RequestError(str(err.detail), code="method_not_allowed" if err.status_code == 405 else "http_error")
        e.status = err.status_code
        return error_response(e, headers=dict(err.headers or {}))

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(request: Request, err: ClientDisconnect) -> Response:
        # nobody is left to answer: one line, never a traceback (a stream of these would flood the log)
        log.info(
            "%s %s: the client disconnected before its request body was complete", request.method, request.url.path
        )
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, err: Exception) -> JSONResponse:
        rid = getattr(request.state, "request_id", None)
        log.exception("unexpected error on %s %s (request %s)", request.method, request.url.path, rid)
        body = {
            "error": {
                "message": f"internal error while handling this request (request id {rid}); it was "
                f"logged on the server",
                "type": "server_error",
                "param": None,
                "code": "internal_error",
            }
        }
        return JSONResponse(body, status_code=500)
