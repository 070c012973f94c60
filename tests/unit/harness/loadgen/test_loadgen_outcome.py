from __future__ import annotations

import pytest

from harness.loadgen.outcome import RequestOutcome, error_of_body
from record.run_record import REQUEST_COLUMNS


def outcome(**fields) -> RequestOutcome:
    return RequestOutcome(
        **{
            "request_id": "r",
            "scenario": "short_qa",
            "phase": "load",
            "tenant": "acme",
            "traffic_class": "interactive",
            "sent_unix": 1010.0,
            **fields,
        }
    )


def test_a_row_has_every_request_column_with_times_since_the_run_started() -> None:
    row = outcome(ttft_s=0.25, e2e_s=1.5, http_status=200).row(origin_unix=1000.0)
    assert tuple(row) == REQUEST_COLUMNS
    assert (row["sent_s"], row["first_token_s"], row["done_s"], row["ttft_s"]) == (10.0, 10.25, 11.5, 0.25)


def test_a_row_without_an_answer_has_no_first_token() -> None:
    row = outcome(status="error", http_status=429, error_code="kv_capacity", e2e_s=0.01).row(1000.0)
    assert row["first_token_s"] is None and row["done_s"] == pytest.approx(10.01)


def test_an_outcome_crosses_processes_as_plain_data() -> None:
    o = outcome(ttft_s=0.1, e2e_s=0.2, worker="1")
    assert RequestOutcome.from_message(o.to_message()) == o


def test_the_master_records_a_worker_row_on_its_own_clock_and_keeps_its_lag() -> None:
    """The worker's clock runs 2 s ahead of the master's; its request left 30 ms late."""
    sent = outcome(intended_unix=1012.0, sent_unix=1012.03, ttft_s=0.1)
    row = sent.on_master("w1", clock_offset_s=2.0).row(origin_unix=1000.0)
    assert row["load_worker"] == "w1"
    assert (row["intended_s"], row["sent_s"]) == pytest.approx((10.0, 10.03))
    assert row["sent_s"] - row["intended_s"] == pytest.approx(0.03) and row["ttft_s"] == 0.1


def test_a_closed_loop_row_has_no_intended_time() -> None:
    assert outcome().row(1000.0)["intended_s"] is None


def test_cancels_are_not_failures_but_errors_and_timeouts_are() -> None:
    assert not outcome(status="cancelled").is_failure and not outcome().is_failure
    assert outcome(status="error").is_failure and outcome(status="timeout").is_failure
    refused = outcome(status="error", http_status=429, error_code="tenant_quota")
    assert refused.is_rejection and not refused.is_failure  # explicit: judged by the gates, not a locust failure
    assert outcome(status="error", http_status=429).is_failure  # a 429 without a reason explains nothing


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error": {"message": "full", "type": "x", "code": "kv_capacity"}}', ("kv_capacity", "full")),
        (b'{"error": {"message": "bad", "type": "invalid_request_error"}}', ("invalid_request_error", "bad")),
        (b'{"error": "rate limited", "code": 429}', ("429", "rate limited")),
        (b'{"detail": "Not Found"}', ("", "Not Found")),
        (b"<html>502</html>", ("", "<html>502</html>")),
    ],
)
def test_error_bodies_of_different_servers(body: bytes, expected: tuple[str, str]) -> None:
    assert error_of_body(body) == expected
