from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.request_log import RequestLog
from record.run_record import REQUEST_COLUMNS


def outcome(i: int, **fields) -> RequestOutcome:
    return RequestOutcome(
        **{
            "request_id": f"r{i}",
            "scenario": "s",
            "phase": "load",
            "tenant": "acme",
            "traffic_class": "interactive",
            "sent_unix": 100.0 + i,
            "http_status": 200,
            "e2e_s": 0.5,
            **fields,
        }
    )


def test_rows_are_written_in_record_columns_and_the_first_rejection_is_kept(tmp_path: Path) -> None:
    log = RequestLog(tmp_path / "sub" / "requests.csv", origin_unix=100.0)
    log.add([outcome(0), outcome(1, status="error", http_status=429, error_code="tenant_quota", e2e_s=0.01)])
    log.add([outcome(2, status="cancelled")])
    log.close()
    df = pd.read_csv(tmp_path / "sub" / "requests.csv")
    assert tuple(df.columns) == REQUEST_COLUMNS and list(df["sent_s"]) == [0.0, 1.0, 2.0]
    assert log.first_rejection_unix == 101.01


def test_without_a_path_nothing_is_written() -> None:
    log = RequestLog(None, origin_unix=0.0)
    log.add([outcome(0)])
    assert log.first_rejection_unix is None
    log.close()
