import math

from gates import Outcome


def test_passes_when_batch_waits_boundedly_and_completes(judge, healthy):
    result = judge(healthy, "batch_progress")
    assert result.outcome is Outcome.PASS
    assert result.evidence["num_refused"] == 2 and result.evidence["pause_batch_entries"] == 1


def test_starved_batch_fails_it(judge, healthy):
    for i in range(6):
        healthy.request(
            f"starved-{i}",
            sent_s=30 + i,
            ttft_s=None,
            e2e_s=None,
            status="timeout",
            tenant="batchco",
            traffic_class="batch",
        )
    result = judge(healthy, "batch_progress")
    assert result.outcome is Outcome.FAIL and math.isinf(result.measurements[0].value)
    assert result.evidence["not_completed"][0] == "starved-0"


def test_batch_that_waits_out_its_queue_deadline_did_not_progress(judge, healthy):
    # never started, refused after waiting: starvation behind the deadline, not an admission answer
    for i in range(6):
        healthy.request(
            f"waited-{i}",
            sent_s=30 + i,
            ttft_s=None,
            e2e_s=8.0,
            status="error",
            http_status=429,
            error_code="queue_deadline",
            tenant="batchco",
            traffic_class="batch",
            finish_reason=None,
        )
    result = judge(healthy, "batch_progress")
    assert result.outcome is Outcome.FAIL and result.headline.metric == "min_completed_fraction"
    assert result.evidence["num_waited_out"] == 6


def test_not_measurable_without_batch_traffic(judge, healthy):
    assert judge(healthy.drop("requests", traffic_class="batch"), "batch_progress").outcome is Outcome.NOT_MEASURABLE


def batch_open_at_the_stop(healthy, sent_s: float) -> None:
    for i in range(6):
        healthy.request(
            f"open-{i}",
            sent_s=sent_s,
            ttft_s=None,
            e2e_s=None,
            status="unfinished",
            error_code="run_stopped",
            tenant="batchco",
            traffic_class="batch",
            finish_reason=None,
        )


def test_batch_cut_by_the_stop_before_it_could_wait_is_not_judged(judge, healthy):
    batch_open_at_the_stop(healthy, sent_s=69.0)  # the load ends at 70 s: a second to go
    result = judge(healthy, "batch_progress")
    assert result.outcome is Outcome.PASS and result.evidence["num_cut_by_stop"] == 6


def test_batch_still_open_after_waiting_the_bound_did_not_progress(judge, healthy):
    batch_open_at_the_stop(healthy, sent_s=10.0)  # open for the whole 60 s load
    result = judge(healthy, "batch_progress", p95_max_wait_s=30.0)
    assert result.outcome is Outcome.FAIL and result.evidence["num_cut_by_stop"] == 0


def test_a_batch_request_lost_with_its_replica_is_left_to_replica_kill(judge, healthy):
    for i in range(20):  # far more than the healthy run's batch: counted, they would fail it
        healthy.request(
            f"lost-{i}",
            sent_s=30.0,
            ttft_s=1.0,
            e2e_s=2.0,
            traffic_class="batch",
            tenant="batchco",
            status="error",
            http_status=503,
            error_code="worker_lost",
            finish_reason=None,
        )
    result = judge(healthy, "batch_progress")
    assert result.outcome is Outcome.PASS and result.evidence["num_lost_with_replica"] == 20
