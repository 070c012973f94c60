"""The unloaded baseline: sequential interactive requests before the load starts.

The interactive-TTFT gate compares TTFT under load with this phase ("no order-of-magnitude
degradation"), so it sends what short_qa sends (same prompt size, shared system prompt, an
interactive tenant) through the same exchange code, one request at a time, from the harness
process (httpx), with nothing else in flight. Only the time to the first token is compared, so
answers stop after `BASELINE_MAX_TOKENS`: a reference of 30 requests or more (a P95 of five
moved by a third between identical runs) then costs a second or two, not a quarter minute.
"""

from __future__ import annotations

import httpx

from harness.loadgen.exchange import Call, run_exchange
from harness.loadgen.httpx_transport import HttpxTransport
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.prompts import chat_prompt
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant

SCENARIO = PHASE = "baseline"
BASELINE_MAX_TOKENS = 8


def run_baseline(
    base_url: str,
    *,
    settings: LoadSettings,
    tenant: Tenant,
    model: str,
    num_requests: int,
    transport: httpx.BaseTransport | None = None,
) -> list[RequestOutcome]:
    """`transport`: a test seam (httpx.MockTransport)."""
    outcomes: list[RequestOutcome] = []
    with httpx.Client(timeout=settings.request_timeout_s, transport=transport) as client:
        exchange_transport = HttpxTransport(client, base_url)
        for i in range(num_requests):
            call = Call(
                request_id=f"baseline-{i}",
                scenario=SCENARIO,
                phase=PHASE,
                tenant=tenant,
                model=model,
                prompt=chat_prompt(
                    settings.prompt_tokens, seed=f"baseline-{i}", system=settings.system_prompt, tokens=settings.tokens
                ),
                max_tokens=min(settings.max_tokens, BASELINE_MAX_TOKENS),
            )
            run_exchange(exchange_transport, call, timeout_s=settings.request_timeout_s, on_done=outcomes.append)
    return outcomes
