"""The ASGI response of one completion request: SSE or one JSON body, and cancel on disconnect.

Why a hand-written ASGI response instead of `StreamingResponse`: the response must (1) watch
for the client going away during the *whole* request, streaming or not, queued, prefilling or
decoding, and abort the engine request at once; (2) hold back the status line until the
request has either produced its first token or ended, so a request that leaves the queue at
its deadline, or fails for memory before any token, still answers with a real HTTP status
(429 queue_deadline, 503 out_of_memory) instead of a 200 with an error inside; (3) send every
token as its own SSE event as soon as the engine loop wakes the writer (in the step after the
one that produced it), built from prepared templates and per-token JSON pieces made once per
process (the per-token budget is tens of µs). A writer that wakes late still sends one event per
token, never one event for several.

After the first byte, an engine-side failure ends the stream with an SSE error event and
`[DONE]`. A disconnect watcher task waits on `receive()` for `http.disconnect`; it logs one line,
sets a flag, aborts the request and wakes the writer, which then stops without writing.
"""

from __future__ import annotations

import asyncio
import json
import logging

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from record.errors import RequestError
from reference_engine.request import FinishReason
from reference_engine.server.engine_loop import EngineLoop, RequestStream
from reference_engine.server.errors import error_response, finish_error
from reference_engine.server.openai_format import DONE, ResponseFormat, TokenPieces, error_event, extension
from reference_engine.server.pd_loop import PdLoop
from reference_engine.tokenizer import Tokenizer

_COMPLETED = (FinishReason.STOP, FinishReason.LENGTH)
log = logging.getLogger("kvgate.server")


def request_headers(stream: RequestStream, worker: int | None) -> dict[str, str]:
    """The kvgate response headers of a request, as far as they are known now."""
    r = stream.request
    h = {"x-request-id": r.request_id}
    if r.client_request_id is not None:
        h["x-client-request-id"] = r.client_request_id
    if r.session_rebuilt:
        h["x-kvgate-session-rebuilt"] = "true"
    if r.max_tokens_clamped:
        h["x-kvgate-max-tokens-clamped"] = str(r.max_new_tokens)
    if r.approximate:
        h["x-kvgate-approximate"] = "true"
    if worker is not None:
        h["x-kvgate-worker"] = str(worker)
    return h


class CompletionResponse(Response):
    """A `Response` only so FastAPI passes it through untouched; it writes itself."""

    background = None
    status_code = 200

    def __init__(
        self,
        loop: EngineLoop | PdLoop,
        stream: RequestStream,
        fmt: ResponseFormat,
        tokenizer: Tokenizer,
        pieces: TokenPieces,
        worker: int | None,
    ) -> None:
        self.loop = loop
        self.stream = stream
        self.fmt = fmt
        self.tokenizer = tokenizer
        self.pieces = pieces
        self.worker = worker
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.ensure_future(self._watch_disconnect(receive))
        try:
            if self.stream.streaming:
                await self._stream(scope, receive, send)
            else:
                await self._whole(scope, receive, send)
        finally:
            watcher.cancel()
            if not self.stream.finished:
                self.loop.abort(self.stream)

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                r = self.stream.request
                if not self.stream.finished:
                    log.info(
                        "request %s (tenant %s): the client disconnected after %d output tokens; aborted",
                        r.request_id,
                        r.tenant,
                        len(r.output_token_ids),
                    )
                self.loop.abort(self.stream)
                self.stream.notify()
                return

    # ------------------------------------------------------------- streaming
    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream, fmt = self.stream, self.fmt
        while not (self.disconnected or stream.finished or stream.request.output_token_ids):
            await stream.wait(0)  # (the request is read anew: a P/D pair's passes to its decode side)
        if self.disconnected:
            return
        r = stream.request  # it has its first token, or it ended: it stays the one request now
        if not r.output_token_ids:  # ended before its first token: a real status code
            await self._send_error(scope, receive, send)
            return
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
        headers += [(k.encode(), v.encode()) for k, v in request_headers(stream, self.worker).items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        piece = self.pieces.piece
        chunk = fmt.content_chunk_json
        parts = [fmt.role_chunk()]
        num_sent = 0
        while True:
            ids = r.output_token_ids
            n = len(ids)
            while num_sent < n:  # one SSE event per token, even when the writer woke a step late
                parts.append(chunk(piece(ids[num_sent], num_sent == 0)))
                num_sent += 1
            if stream.finished:
                parts.append(self._ending())
                await send({"type": "http.response.body", "body": b"".join(parts), "more_body": False})
                return
            await send({"type": "http.response.body", "body": b"".join(parts), "more_body": True})
            parts = []
            await stream.wait(num_sent)
            if self.disconnected:
                return

    def _ending(self) -> bytes:
        r = self.stream.request
        if r.finish_reason in _COMPLETED:
            ending = self.fmt.final_chunk(r.finish_reason.value, extension(r, self.worker)) + self.fmt.usage_chunk(r)
        else:
            ending = error_event(self._error())
        return ending + DONE

    def _error(self) -> RequestError:
        return self.stream.refusal or finish_error(self.stream.request)

    # ------------------------------------------------------------------ whole
    async def _whole(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = self.stream
        while not (self.disconnected or stream.finished):
            await stream.wait(len(stream.request.output_token_ids))
        if self.disconnected:
            return
        r = stream.request
        if r.finish_reason not in _COMPLETED:
            await self._send_error(scope, receive, send)
            return
        body = self.fmt.body(
            self.tokenizer.decode(r.output_token_ids), r.finish_reason.value, r, extension(r, self.worker)
        )
        headers = [(b"content-type", b"application/json")]
        headers += [(k.encode(), v.encode()) for k, v in request_headers(stream, self.worker).items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(body).encode(), "more_body": False})

    async def _send_error(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(self.stream, self.worker)
        response = error_response(self._error(), headers=headers)
        await response(scope, receive, send)
