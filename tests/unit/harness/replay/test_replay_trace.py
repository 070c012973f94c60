"""Rate and time scaling of a trace's arrivals."""

from pathlib import Path

import pytest

from harness.replay.trace import Trace, TraceError, TraceRequest


def trace(*arrivals: float) -> Trace:
    requests = [TraceRequest(i + 1, t, 10, 2) for i, t in enumerate(arrivals)]
    return Trace(format="test", source=Path("t"), requests=requests)


def test_rate_scale_divides_and_time_scale_multiplies_arrival_times():
    t = trace(0.0, 1.0, 4.0)
    assert [r.arrival_s for r in t.rescaled(rate_scale=2.0).requests] == [0.0, 0.5, 2.0]
    assert [r.arrival_s for r in t.rescaled(time_scale=3.0).requests] == [0.0, 3.0, 12.0]
    assert [r.arrival_s for r in t.rescaled(rate_scale=2.0, time_scale=3.0).requests] == [0.0, 1.5, 6.0]
    assert t.rescaled(rate_scale=2.0).requests[1].num_prompt_tokens == 10  # sizes never scale
    assert t.rescaled() is t


@pytest.mark.parametrize("kw", [{"rate_scale": 0.0}, {"time_scale": -1.0}, {"rate_scale": float("nan")}])
def test_scales_must_be_positive(kw):
    with pytest.raises(TraceError, match="must be a positive number"):
        trace(0.0).rescaled(**kw)


def test_size_scale_shrinks_lengths_and_blocks_but_keeps_times_and_ids():
    t = Trace(
        format="test",
        source=Path("t"),
        requests=[TraceRequest(1, 0.0, 6758, 500, (0, 1, 2)), TraceRequest(2, 3.0, 20, 1, (0, 3))],
        prefix_block_tokens=512,
    )
    small = t.resized(1 / 16)
    assert small.prefix_block_tokens == 32
    assert [(r.num_prompt_tokens, r.num_output_tokens) for r in small.requests] == [(422, 31), (1, 1)]
    assert [(r.arrival_s, r.prefix_ids) for r in small.requests] == [(0.0, (0, 1, 2)), (3.0, (0, 3))]
    assert t.resized(1.0) is t
    with pytest.raises(TraceError, match="must be a positive number"):
        t.resized(0.0)
