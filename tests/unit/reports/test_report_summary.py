import pytest

from reports.summary import summarize
from tests.fixtures.records import RecordBuilder


def test_summary_of_the_healthy_run(healthy_run):
    s = summarize(healthy_run[0])
    assert s.peak_live_usage == 0.8 and s.peak_live_blocks == 800
    assert s.p95_ttft_ms == {"interactive": 400, "batch": 3000}
    assert (s.evicted_blocks, s.num_preemptions) == (40, 2)
    assert s.rejections == {"kv_capacity": 2}
    # load phase 10-70 s: 30 interactive + 8 batch requests sent in it finished ok
    assert s.goodput_rps == pytest.approx(38 / 60)


def test_unknown_is_none_not_zero(tmp_path):
    s = summarize(RecordBuilder().healthy().signals(engine_events=False).build(tmp_path))
    assert s.evicted_blocks is None and s.num_preemptions is None and s.evicted_cached_blocks is None


def test_rejections_name_timeouts_and_bare_errors(tmp_path):
    builder = RecordBuilder().request(status="timeout", error_code="timeout", ttft_s=None)
    builder.request(status="error", http_status=500, ttft_s=None)
    assert summarize(builder.build(tmp_path)).rejections == {"http 500": 1, "timeout": 1}
