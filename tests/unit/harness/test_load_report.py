"""What the master's report and the rows say about a load: the per-sender lag bound, a lost
worker's unsent load, workers that never came — each a harness error that names what and who."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from harness.load_report import account_for, missing_workers, peak_in_flight
from record.run_record import HARNESS_ERROR

WORKERS = {"w0": {"lost": False, "clock_offset_ms": 0.1}, "w1": {"lost": False, "clock_offset_ms": -0.2}}


def rows(lags_ms: dict[str, list[float]], every_s: float = 0.1) -> pd.DataFrame:
    """Requests of each sender, one every `every_s`, each answered 50 ms after it left."""
    out = []
    for sender, lags in lags_ms.items():
        for n, lag in enumerate(lags):
            sent = n * every_s + lag / 1000
            out.append(
                {
                    "request_id": f"{sender}-{n}",
                    "intended_s": n * every_s,
                    "sent_s": sent,
                    "done_s": sent + 0.05,
                    "ttft_s": 0.02,
                    "load_worker": sender,
                    "status": "ok",
                    "error_code": "",
                }
            )
    return pd.DataFrame(out)


def report(per_sender: dict[str, int], owed: dict[str, list[int]] | None = None, **workers: Any) -> dict[str, Any]:
    return {
        "workers": {**WORKERS, **workers},
        "open_loop": {
            "workload": {"workload": "open_loop_chat"},
            "origin_unix": 1000.0,
            "duration_s": 5.0,
            "schedule": {
                "num_dealt": sum(per_sender.values()),
                "is_exhausted": True,
                "num_duplicates": 0,
                "per_sender": {s: {"num_dealt": n, "num_recorded": n} for s, n in per_sender.items()},
                "owed": owed or {},
            },
            "problem": "",
        },
    }


def test_a_load_kept_on_schedule_by_every_sender_is_accounted_without_a_note() -> None:
    account = account_for(report({"w0": 10, "w1": 10}), rows({"w0": [1.0] * 10, "w1": [2.0] * 10}), **LIMITS)
    assert account.notes == [] and account.origin_unix == 1000.0
    summary = account.live["open_loop"]
    assert summary["num_sent"] == 20 and summary["num_scheduled"] == 20
    assert summary["senders"]["w1"]["client_lag"]["p99_ms"] == pytest.approx(2.0)
    assert summary["client_lag"]["num_requests"] == 20 and account.live["load_workers"] == WORKERS


def test_the_lag_bound_is_judged_per_sender() -> None:
    """w1 sent one of its ten late: over all 210 rows P99 is 2 ms, within the bound; w1's own is not."""
    late = rows({"w0": [1.0] * 200, "w1": [2.0] * 9 + [400.0]})
    account = account_for(report({"w0": 200, "w1": 10}), late, **LIMITS)
    assert account.live["open_loop"]["client_lag"]["p99_ms"] == pytest.approx(2.0)
    (note,) = account.notes
    assert note.startswith(f"{HARNESS_ERROR}: the client could not keep its schedule: w1: P99 client lag 400.0 ms")
    assert "w0" not in note


def test_a_worker_lost_mid_run_names_the_load_it_never_sent() -> None:
    lost = {"lost": True, "clock_offset_ms": 0.0}
    account = account_for(
        report({"w0": 10, "w1": 10}, owed={"w1": [11, 13, 15]}, w1=lost),
        rows({"w0": [1.0] * 10, "w1": [1.0] * 7}),
        **LIMITS,
    )
    (note,) = account.notes
    assert note.startswith(f"{HARNESS_ERROR}: 3 of 20 scheduled requests were never recorded")
    assert "w1 (lost mid-run): 3, schedule indices 11, 13, 15" in note
    assert account.live["open_loop"]["senders"]["w1"]["lost"]


def test_a_lost_worker_of_a_closed_loop_is_a_harness_error_too() -> None:
    account = account_for({"workers": {**WORKERS, "w1": {"lost": True}}}, rows({"w0": [0.0]}), **LIMITS)
    assert account.notes == [
        f"{HARNESS_ERROR}: locust worker(s) w1 were lost mid-run: the requests they had in flight are not in the record"
    ]
    assert "open_loop" not in account.live


def test_no_report_no_account() -> None:
    assert account_for(None, rows({}), **LIMITS).live == {}


def test_workers_that_never_came_say_how_many_were_waited_for_and_who_was_refused() -> None:
    refused = {
        "started": False,
        "master": {"kvgate": "0.3.0", "scenarios": "aaaa"},
        "workers": {"w0": {}},
        "refused": [{"client_id": "old_1", "kvgate": "0.2.0", "scenarios": "aaaa"}],
    }
    said = missing_workers(refused, expected=2, waited_s=30)
    assert said is not None and said.startswith("waited 30 s for 2 locust worker(s); 1 connected and admitted")
    assert "old_1 (kvgate 0.2.0" in said and "this master runs kvgate 0.3.0" in said
    assert missing_workers(None, expected=2, waited_s=30) is not None  # none ever connected
    assert missing_workers({"started": True}, expected=2, waited_s=30) is None
    assert missing_workers(None, expected=0, waited_s=30) is None


def test_peak_in_flight_counts_overlapping_requests() -> None:
    frame = pd.DataFrame({"sent_s": [0.0, 0.1, 0.2, 1.0], "done_s": [0.5, 0.15, 0.6, 1.1]})
    assert peak_in_flight(frame) == 2


LIMITS = {"max_lag_ms": 50.0, "max_in_flight": 256}
