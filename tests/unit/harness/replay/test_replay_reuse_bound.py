"""The infinite-cache bound of a trace: leading whole blocks some earlier request had, at a block size."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.replay.reuse_bound import prefix_reuse
from harness.replay.trace import Trace, TraceRequest


def trace(*requests: tuple[tuple[int, ...], int], block: int | None = 512) -> Trace:
    rows = [
        TraceRequest(row=i + 1, arrival_s=float(i), num_prompt_tokens=n, num_output_tokens=8, prefix_ids=ids)
        for i, (ids, n) in enumerate(requests)
    ]
    return Trace(format="mooncake", source=Path("t.jsonl"), requests=rows, prefix_block_tokens=block)


def test_an_infinite_cache_hits_the_leading_blocks_an_earlier_request_had() -> None:
    t = trace(((1, 2), 1024), ((1, 2, 3), 1536), ((1, 9), 1024), ((4,), 512))
    reuse = prefix_reuse(t, block_tokens=16)
    assert reuse is not None
    # the second hits its first 1,024 tokens, the third its first 512; the others nothing
    assert reuse.bound == pytest.approx((1024 + 512) / (1024 + 1536 + 1024 + 512))
    assert reuse.longest_shared_tokens == 1024 and reuse.num_requests == 4 and reuse.block_tokens == 16


def test_a_block_larger_than_the_shared_prefix_hits_nothing() -> None:
    t = trace(((1, 2), 40), ((1, 3), 40), block=16)  # they share 16 tokens
    small, large = prefix_reuse(t, block_tokens=16), prefix_reuse(t, block_tokens=32)
    assert small is not None and small.bound == pytest.approx(16 / 80)
    assert large is not None and large.bound == 0 and large.longest_shared_tokens == 16 < large.block_tokens


def test_a_trace_without_prefix_ids_has_no_bound() -> None:
    assert prefix_reuse(trace(((), 100), ((), 100), block=None), block_tokens=16) is None
    assert prefix_reuse(trace(block=512), block_tokens=16) is None  # no requests
