"""A P/D proxy in front of two vLLM instances, as vLLM's disaggregated examples put one: each
completion goes to the prefill instance with `max_tokens = 1`, then, as the client sent it, to the
decode instance, whose answer (streamed or whole) is the client's. A client that hangs up closes
the decode request's connection, which is how vLLM hears of an abort.

    python -m tests.real_engines.pd_proxy --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200 --port 8000

`GET /health` is both instances'; `/v1/models` the decode instance's. The client's Authorization
header goes to both. Test support: loopback only.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import httpx
import uvicorn
from fastapi import FastAPI, Request
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response, StreamingResponse

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
_PASSED = ("authorization", "content-type")


def create_proxy(prefill: str, decode: str) -> FastAPI:
    app = FastAPI(title="P/D proxy (test support)")
    client = httpx.AsyncClient(timeout=TIMEOUT)

    def headers(request: Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k in _PASSED}

    async def relay(request: Request, path: str) -> Response:
        body = json.loads(await request.body())
        first = {**body, "max_tokens": 1, "stream": False}
        first.pop("max_completion_tokens", None)
        first.pop("stream_options", None)
        done = await client.post(f"{prefill}{path}", json=first, headers=headers(request))
        if done.status_code != 200:  # the prefill instance refused: that is the client's answer
            return Response(done.content, status_code=done.status_code, media_type="application/json")
        upstream = await client.send(
            client.build_request("POST", f"{decode}{path}", json=body, headers=headers(request)), stream=True
        )

        async def chunks() -> AsyncIterator[bytes]:
            async for chunk in upstream.aiter_raw():
                yield chunk

        return StreamingResponse(
            chunks(),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
            background=BackgroundTask(upstream.aclose),  # also on a client gone: vLLM aborts
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await relay(request, "/v1/chat/completions")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await relay(request, "/v1/completions")

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        resp = await client.get(f"{decode}/v1/models", headers=headers(request))
        return Response(resp.content, status_code=resp.status_code, media_type="application/json")

    @app.get("/health")
    async def health() -> JSONResponse:
        codes = [(await client.get(f"{url}/health")).status_code for url in (prefill, decode)]
        return JSONResponse({"prefill": codes[0], "decode": codes[1]}, status_code=max(codes))

    return app


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefill", required=True)
    p.add_argument("--decode", required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    uvicorn.run(create_proxy(args.prefill, args.decode), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
