"""A fault proxy: an OpenAI-compatible server that serves nothing useful, in front of a real one.

    with fault_proxy(upstream_url, Fault.EMPTY_STREAM) as url:      # in a test
        ...
    python -m tests.fault_proxy --upstream http://127.0.0.1:8000 --fault all_503 --port 8100

Every request but a streamed chat completion is relayed to the upstream untouched (models,
metrics, tokenize, the preflight's one non-streamed request), so the target looks up and
working; streamed chat completions — all the load — break in the way `Fault` names. kvgate
must fail a run against each fault (exit 1, the failing gate named), and pass one through
`Fault.NONE`: the proxy is how the gates are shown not to pass a target that serves nothing.
It runs on 127.0.0.1 only, in front of `kvgate serve` or any engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from enum import Enum

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from harness.target import free_port
from tests.waiting import wait_for

CHAT_PATH = "/v1/chat/completions"
DROPPED_HEADERS = ("host", "content-length", "transfer-encoding", "connection")
HANG_ABOVE_IN_FLIGHT = 1
"""`Fault.HANG_UNDER_LOAD` answers while at most this many chat requests are in flight (the
sequential baseline passes) and hangs every request beyond it."""
CUT_AFTER_LINES = 3
"""`Fault.CUT_STREAM` closes the connection after this many stream lines: mid-answer, no [DONE]."""
SSE = "text/event-stream"


class Fault(str, Enum):
    NONE = "none"  # a healthy passthrough
    ALL_503 = "all_503"  # every chat refused with 503, the baseline included
    EMPTY_STREAM = "empty_stream"  # 200, then only `data: [DONE]`
    BROKEN_JSON = "broken_json"  # 200, chunks that are not JSON, then `data: [DONE]`
    HANG_UNDER_LOAD = "hang_under_load"  # no answer while more than one request is in flight
    CUT_STREAM = "cut_stream"  # the upstream's stream, cut after a few lines


FAILING_GATES: dict[Fault, set[str]] = {
    Fault.ALL_503: {"goodput", "rejections"},
    Fault.EMPTY_STREAM: {"goodput", "explicit_overflow"},
    Fault.BROKEN_JSON: {"goodput", "explicit_overflow"},
    Fault.HANG_UNDER_LOAD: {"goodput", "explicit_overflow"},
    Fault.CUT_STREAM: {"goodput", "explicit_overflow"},
}
"""The gates a run through each fault must fail, whatever the engine behind the proxy."""


async def relay_to(client: httpx.AsyncClient, request: Request) -> Response:
    """`request` sent on to `client`'s upstream as it came, its answer streamed back as it goes."""
    headers = {k: v for k, v in request.headers.items() if k not in DROPPED_HEADERS}
    sent = client.build_request(
        request.method, request.url.path, params=request.query_params, content=await request.body(), headers=headers
    )
    resp = await client.send(sent, stream=True)
    kept = {k: v for k, v in resp.headers.items() if k not in DROPPED_HEADERS and k != "content-encoding"}
    return StreamingResponse(
        resp.aiter_raw(), status_code=resp.status_code, headers=kept, background=BackgroundTask(resp.aclose)
    )


def create_app(upstream: str, fault: Fault) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=None)
    in_flight = 0

    async def relay(request: Request) -> Response:
        return await relay_to(client, request)

    async def chat(request: Request) -> Response:
        nonlocal in_flight
        if fault is Fault.NONE or not _is_streamed(await request.body()):
            return await relay(request)
        if fault is Fault.ALL_503:
            return JSONResponse(
                {
                    "error": {
                        "message": "the fault proxy refuses everything",
                        "type": "overloaded",
                        "code": "service_unavailable",
                    }
                },
                status_code=503,
            )
        if fault is Fault.EMPTY_STREAM:
            return StreamingResponse(_lines([b"data: [DONE]"]), media_type=SSE)
        if fault is Fault.BROKEN_JSON:
            broken = [b'data: {"id": "x", "choices": [{"delta": {"content": "he', b"data: {not json}", b"data: [DONE]"]
            return StreamingResponse(_lines(broken), media_type=SSE)
        if fault is Fault.CUT_STREAM:
            return await _cut(await relay(request))
        in_flight += 1  # HANG_UNDER_LOAD
        try:
            while in_flight > HANG_ABOVE_IN_FLIGHT:
                if await request.is_disconnected():
                    return Response(status_code=499)
                await asyncio.sleep(0.2)
            return await relay(request)
        finally:
            in_flight -= 1

    return Starlette(
        routes=[Route(CHAT_PATH, chat, methods=["POST"]), Route("/{path:path}", relay, methods=["GET", "POST"])]
    )


def _is_streamed(body: bytes) -> bool:
    try:
        return json.loads(body).get("stream") is True
    except (ValueError, AttributeError):
        return False


async def _lines(lines: list[bytes]) -> AsyncIterator[bytes]:
    for line in lines:
        yield line + b"\n\n"


async def _cut(resp: Response) -> Response:
    """The relayed stream, ended after CUT_AFTER_LINES non-blank lines without its end."""
    if not isinstance(resp, StreamingResponse) or resp.status_code != 200:
        return resp
    upstream = resp.body_iterator

    async def cut() -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in upstream:
            for line in chunk.split(b"\n"):
                if line.strip():
                    seen += 1
                    if seen > CUT_AFTER_LINES:
                        raise ConnectionAbortedError("the fault proxy cut the stream")
                    yield line + b"\n\n"

    return StreamingResponse(cut(), status_code=200, media_type=SSE, background=resp.background)


@contextmanager
def fault_proxy(upstream: str, fault: Fault) -> Iterator[str]:
    """Serve the proxy on a free loopback port in a thread; yields its base URL."""
    with serving(create_app(upstream, fault), "the fault proxy") as url:
        yield url


@contextmanager
def serving(app: Starlette, what: str) -> Iterator[str]:
    """`app` on a free loopback port in a thread, for the length of the block; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, f"{what} starts", alive=thread.is_alive)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the server to put the proxy in front of")
    parser.add_argument("--fault", choices=[f.value for f in Fault], default=Fault.NONE.value)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream, Fault(args.fault)), host="127.0.0.1", port=args.port, log_level="warning")
