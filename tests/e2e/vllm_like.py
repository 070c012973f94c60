"""A stand-in for a vLLM server, built from the reference engine: run as a script.

    python tests/e2e/vllm_like.py --upstream http://127.0.0.1:8000 --port 8100 [--block-size 16]

It relays the OpenAI routes (/v1/chat/completions streamed byte for byte, /v1/models) and
/health to the upstream engine, serves only the `vllm:` series of the upstream's /metrics, and
has no admin API (every other path is 404): what the harness sees of a real vLLM deployment.
With `--block-size` it states its pool as vLLM does, `vllm:cache_config_info` with the
upstream's block count (`kvgate_kv_pool_blocks`) and that block size.
"""

from __future__ import annotations

import argparse
import re

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

RELAYED_HEADERS = ("authorization", "content-type", "accept")


def vllm_lines(text: str) -> str:
    """The upstream's `vllm:` series, less its pool (`--block-size` decides whether to state one)."""
    keep = [
        line
        for line in text.splitlines()
        if (line.startswith("vllm:") or line.startswith(("# HELP vllm:", "# TYPE vllm:")))
        and "vllm:cache_config_info" not in line
    ]
    return "\n".join(keep) + "\n"


def cache_config_line(text: str, block_size: int) -> str:
    """vLLM's pool-size info metric, from the upstream's own block count."""
    found = re.search(r"^kvgate_kv_pool_blocks(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    if found is None:
        return ""
    num_blocks = int(float(found.group(1)))
    return f'vllm:cache_config_info{{block_size="{block_size}",num_gpu_blocks="{num_blocks}"}} 1.0\n'


def create_app(upstream: str, block_size: int | None = None) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=None)

    async def chat(request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k in RELAYED_HEADERS}
        upstream_request = client.build_request(
            "POST", "/v1/chat/completions", content=await request.body(), headers=headers
        )
        resp = await client.send(upstream_request, stream=True)
        kept = {k: v for k, v in resp.headers.items() if k in ("content-type", "x-request-id")}
        return StreamingResponse(
            resp.aiter_raw(), status_code=resp.status_code, headers=kept, background=BackgroundTask(resp.aclose)
        )

    async def models(request: Request) -> Response:
        resp = await client.get("/v1/models", headers={"authorization": request.headers.get("authorization", "")})
        return JSONResponse(resp.json(), status_code=resp.status_code)

    async def metrics(request: Request) -> Response:
        text = (await client.get("/metrics")).text
        return PlainTextResponse(vllm_lines(text) + (cache_config_line(text, block_size) if block_size else ""))

    async def health(request: Request) -> Response:
        return Response(status_code=(await client.get("/health")).status_code)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/metrics", metrics),
            Route("/health", health),
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--block-size", type=int, default=None)
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream, args.block_size), host="127.0.0.1", port=args.port, log_level="warning")
