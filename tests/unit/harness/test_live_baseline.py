from __future__ import annotations

import json

import httpx

from harness.baseline import run_baseline
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant


def sse_server(requests: list[dict]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(json.loads(request.content))
        chunks = [
            {"id": "chatcmpl-9", "choices": [{"delta": {"role": "assistant", "content": ""}}]},
            {"id": "chatcmpl-9", "choices": [{"delta": {"content": "kaloan"}}]},
            {"id": "chatcmpl-9", "choices": [{"delta": {}, "finish_reason": "stop"}]},
        ]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream", "x-request-id": "e-1"})

    return httpx.MockTransport(handle)


def test_the_baseline_sends_short_qa_requests_one_by_one_and_records_them() -> None:
    sent: list[dict] = []
    settings = LoadSettings(prompt_tokens=40, max_tokens=8)
    outcomes = run_baseline(
        "http://engine",
        settings=settings,
        tenant=Tenant("acme", "sk-acme"),
        model="m",
        num_requests=3,
        transport=sse_server(sent),
    )
    assert [(o.request_id, o.phase, o.scenario, o.status) for o in outcomes] == [
        (f"baseline-{i}", "baseline", "baseline", "ok") for i in range(3)
    ]
    assert all(o.ttft_s is not None and o.engine_request_id == "e-1" for o in outcomes)
    assert sent[0]["messages"][0] == {"role": "system", "content": settings.system_prompt}
    assert (sent[0]["max_tokens"], sent[0]["stream"]) == (8, True)
