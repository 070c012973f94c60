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


def test_the_cache_numbers_of_the_healthy_run(healthy_run):
    s = summarize(healthy_run[0])
    assert s.prefix_hit_ratio == pytest.approx(32 / 100)  # every scheduled request hit 32 of its 100 prompt tokens
    assert s.evicted_sessions_by_reason == {"watermark": 5}
    assert s.goodput_rps_by_class == {"interactive": pytest.approx(30 / 60), "batch": pytest.approx(8 / 60)}
    assert s.rejections_by_tenant == {"batchco": 2}
    assert s.pressure is None  # the fixture predates meta.pressure


def test_reprefill_counts_discarded_tokens_of_recompute_preemptions_and_rebuilt_session_prompts(tmp_path):
    builder = RecordBuilder().healthy()  # two recompute preemptions without token counts
    assert summarize(builder.build(tmp_path / "a")).reprefill_preempted_tokens is None
    assert summarize(builder.final(recompute_tokens=900).build(tmp_path / "b")).reprefill_preempted_tokens == 900
    builder.event("preempted", 50.0, request_id="int-3", mode="recompute", num_tokens=120)
    builder.event("preempted", 51.0, request_id="int-4", mode="swap", num_tokens=0)
    builder.served("turn-2", sent_s=55.0, session_rebuilt=True, prompt_tokens=2_000)  # its scheduled event hit 32
    builder.request("turn-3", sent_s=56.0, session_rebuilt=True, prompt_tokens=3_000, status="cancelled")  # never ran
    s = summarize(builder.build(tmp_path / "c"))
    assert s.reprefill_preempted_tokens == 120  # the logged count wins over the run total
    assert s.reprefill_rebuilt_tokens == 2_000 - 32
    assert summarize(RecordBuilder().healthy().build(tmp_path / "d")).reprefill_rebuilt_tokens == 0


def test_reprefill_is_unknown_without_engine_events(tmp_path):
    s = summarize(RecordBuilder().healthy().signals(engine_events=False).build(tmp_path))
    assert s.reprefill_preempted_tokens is None and s.reprefill_rebuilt_tokens is None
    assert s.prefix_hit_ratio is None and s.evicted_sessions_by_reason is None
