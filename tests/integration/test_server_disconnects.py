"""Cancel on disconnect against a real server: a storm of clients hanging up mid-prefill and
mid-decode leaves no request blocks behind, and every release is timed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.integration.server_process import ADMIN, running_server, wait_until_drained

NUM_DECODE_DROPS, NUM_PREFILL_DROPS = 200, 100


async def drop_after_first_token(http: httpx.AsyncClient, base: str, i: int) -> None:
    body = {"model": "kvgate-tiny", "prompt": f"tell me a long story number {i}", "max_tokens": 1000, "stream": True}
    async with http.stream(
        "POST",
        f"{base}/v1/completions",
        json=body,
        headers={"Authorization": "Bearer sk-acme", "X-Request-Id": f"decode-{i}"},
    ) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if '"text":"' in line:
                return  # leaving the block closes the connection mid-stream


async def drop_during_prefill(base: str, i: int) -> None:
    """Send a long prompt on a raw socket and hang up before its first token can exist."""
    body = json.dumps(
        {"model": "kvgate-tiny", "prompt": list(range(i, i + 3000)), "max_tokens": 50, "stream": i % 2 == 0}
    ).encode()
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nHost: kvgate\r\nAuthorization: Bearer sk-globex\r\n"
        b"X-Request-Id: prefill-%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        % (i, len(body))
        + body
    )
    await writer.drain()
    await asyncio.sleep(0.01)
    writer.close()


@pytest.mark.slow
def test_a_disconnect_storm_leaves_zero_live_request_blocks(tmp_path):
    with running_server(tmp_path, step_ms=5.0) as base:

        async def storm() -> None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
            async with httpx.AsyncClient(limits=limits, timeout=60) as http:
                await asyncio.gather(
                    *(drop_after_first_token(http, base, i) for i in range(NUM_DECODE_DROPS)),
                    *(drop_during_prefill(base, i) for i in range(NUM_PREFILL_DROPS)),
                )

        asyncio.run(storm())
        snap = wait_until_drained(base)
        assert snap["active_blocks"] == 0 and snap["live_blocks"] == snap["retained_blocks"] == snap["pinned_blocks"]
        ledger = httpx.get(f"{base}/admin/ledger", headers=ADMIN).json()
        assert ledger["requests"] == [] and all(t["reserved_blocks"] == 0 for t in ledger["tenants"])

        page = httpx.get(f"{base}/admin/events", headers=ADMIN).json()
        rows = [dict(zip(page["columns"], r)) for r in page["rows"]]
        engine_id = {r["client_request_id"]: r["request_id"] for r in rows if r["kind"] in ("admitted", "queued")}
        cancelled = {r["request_id"] for r in rows if r["kind"] == "cancel_received"}
        assert {engine_id[f"decode-{i}"] for i in range(NUM_DECODE_DROPS)} <= cancelled
        admitted_prefills = {rid for label, rid in engine_id.items() if label.startswith("prefill-")}
        assert admitted_prefills and admitted_prefills <= cancelled
        first_tokens = {r["request_id"] for r in rows if r["kind"] == "first_token"}
        assert admitted_prefills - first_tokens, "some hang-ups must land mid-prefill"
        released = [r for r in rows if r["kind"] == "blocks_released" and r["reason"] == "cancelled"]
        assert len(released) == len(cancelled) and all(r["latency_s"] is not None for r in released)
