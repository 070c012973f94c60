"""The printed figures, from a small hand-written run record."""

import pytest

from harness.replay.summary import ReplaySummary
from record.run_record import Phase, PoolInfo, RunMeta, RunRecord, RunRecordWriter


@pytest.fixture
def record(tmp_path):
    with RunRecordWriter(tmp_path) as w:
        w.append(
            "requests",
            [
                {"request_id": "a", "tenant": "acme", "status": "ok", "ttft_s": 0.2},
                {"request_id": "b", "tenant": "acme", "status": "ok", "ttft_s": 1.0},
                {"request_id": "c", "tenant": "globex", "status": "ok", "ttft_s": 0.4},
                {
                    "request_id": "d",
                    "tenant": "globex",
                    "status": "error",
                    "http_status": 429,
                    "error_code": "tenant_quota",
                },
                {
                    "request_id": "e",
                    "tenant": "acme",
                    "status": "error",
                    "http_status": 429,
                    "error_code": "queue_deadline",
                },
                {"request_id": "f", "tenant": "acme", "status": "error", "http_status": 503, "error_code": "oom"},
            ],
        )
        w.append(
            "events",
            [
                {"seq": 0, "kind": "admitted", "request_id": "a", "num_tokens": 100},
                {"seq": 1, "kind": "admitted", "request_id": "b", "num_tokens": 300},
                {"seq": 2, "kind": "queued", "request_id": "c", "num_tokens": 100},
                {"seq": 3, "kind": "scheduled", "request_id": "a", "num_tokens": 0},
                {"seq": 4, "kind": "scheduled", "request_id": "b", "num_tokens": 160},
                {"seq": 5, "kind": "scheduled", "request_id": "c", "num_tokens": 80},
                {"seq": 6, "kind": "evicted", "num_blocks": 7},
                {"seq": 7, "kind": "oom", "num_blocks": 3},
                {"seq": 8, "kind": "preempted", "request_id": "b"},
            ],
        )
        w.append("samples", [{"t_s": 0.0, "live_blocks": 10}, {"t_s": 1.0, "live_blocks": 40}])
        w.write_meta(
            RunMeta(
                run_id="r",
                mode="replay",
                started_unix=0.0,
                duration_s=12.0,
                policy="lru",
                config_digest="abc",
                pool=PoolInfo(num_blocks=100, block_tokens=16, bytes_per_block=2.0, model="m", gpu="g"),
                phases=[Phase(name="load", start_s=0.0, end_s=10.0)],
                final={"num_evicted_cached_blocks": 50},
            )
        )
    return RunRecord.load(tmp_path)


def test_summary_figures(record):
    s = ReplaySummary.from_record(record, ttft_slo_s=0.5)
    assert (s.num_requests, s.num_ok) == (6, 3)
    assert s.hit_rate == pytest.approx(240 / 500)
    assert s.num_evicted_blocks == 57
    assert (s.ttft_p50_s, s.ttft_p95_s) == (0.4, 1.0)  # never interpolated, as the gates count
    assert (s.peak_live_blocks, s.peak_live_bytes, s.peak_usage) == (40, 80.0, 0.4)
    assert (s.num_oom, s.num_preemptions) == (1, 1)
    assert s.goodput_rps == pytest.approx(2 / 10)  # a and c within 0.5 s, over the 10 s load phase
    assert s.rejections_by_tenant == {"acme": 1, "globex": 1}  # the OOM is an error, not a rejection
    assert s.errors_by_code == {"oom": 1, "queue_deadline": 1, "tenant_quota": 1}
