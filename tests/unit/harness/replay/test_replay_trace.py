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
