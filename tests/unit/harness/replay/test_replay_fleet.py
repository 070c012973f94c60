"""Fleet replay: N engine cores behind one routing policy, the live router's, on a trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.replay.fleet import replay_fleet
from harness.replay.trace import Trace, TraceRequest
from tests.helpers import small_config


def documents_trace(num_documents: int = 4, asks: int = 6) -> Trace:
    """Questions about a few 8-block documents (512-token trace blocks), asked over and over in
    turn, one every 0.2 s: a router that sends each document where it was read hits every time."""
    requests = [
        TraceRequest(
            row=i + 1,
            arrival_s=0.2 * i,
            num_prompt_tokens=4 * 512 + 100,
            num_output_tokens=8,
            prefix_ids=(1000 + d, 2000 + d, 3000 + d, 4000 + d, 90_000 + i),
        )
        for i, d in enumerate(d for _ in range(asks) for d in range(num_documents))
    ]
    return Trace(format="synthetic", source=Path("synthetic"), requests=requests, prefix_block_tokens=512)


@pytest.mark.parametrize("routing", ["round_robin", "least_loaded", "prefix_aware"])
def test_every_request_is_served_by_one_replica(routing: str):
    trace = documents_trace()
    result = replay_fleet(
        trace, small_config(num_blocks=4096), num_workers=3, routing=routing, tenants="fraction:acme=1"
    )
    assert result.num_requests == len(trace.requests) == sum(result.requests_by_worker)
    assert result.num_refused == 0 and result.prompt_tokens == sum(r.num_prompt_tokens for r in trace.requests)


def test_prefix_aware_finds_the_documents_round_robin_scatters_and_a_pool_holds_them():
    trace, config = documents_trace(), small_config(num_blocks=4096)
    ratio = {
        routing: replay_fleet(trace, config, num_workers=3, routing=routing, tenants="fraction:acme=1").hit_ratio
        for routing in ("round_robin", "prefix_aware")
    }
    pooled = replay_fleet(trace, config, num_workers=3, routing="round_robin", tenants="fraction:acme=1", pooled=True)
    # 4 documents over 3 replicas in turn: round robin reads each document on every replica once
    assert ratio["prefix_aware"] > ratio["round_robin"] and ratio["prefix_aware"] == pytest.approx(pooled.hit_ratio)
    assert pooled.requests_by_worker == [len(trace.requests)]
