"""The cancel storm: clients hang up mid-prefill and mid-decode; every cancel is recorded as an
intended cancel (not a failure), every cancel of a request the engine received reaches the
engine, and after the drain no request holds a block. Run beside busy loops, as on a loaded CI
runner: the assertions are counts, never timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates import read_verdict
from tests.e2e.run_support import DEFAULT_CONFIG, cpu_hogs, engine_arrivals, kvgate_run, load_record

pytestmark = pytest.mark.slow


def test_the_cancel_storm_loses_no_cancel_and_leaves_no_live_request_blocks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with cpu_hogs():
        result = kvgate_run(
            "--policy",
            str(DEFAULT_CONFIG),
            "--profile",
            "quick",
            "--scenarios",
            "cancel_storm",
            "--users",
            "6",
            "--duration",
            "6",
            "--out",
            str(run_dir),
        )
    record = load_record(result, run_dir)
    load = record.requests[record.requests["phase"] == "load"]
    cancelled = load[load["status"] == "cancelled"]
    # on the quick profile's small pool two 4K-token cancels may not fit one tenant's cap: an
    # explicit 429 tenant_quota, not a cancel
    refused = load[(load["status"] == "error") & (load["error_code"] == "tenant_quota")]
    # a storm request still open when the run stopped was never cancelled: unfinished, not a cancel
    unfinished = load[load["status"] == "unfinished"]
    assert (unfinished["error_code"] == "run_stopped").all() and not unfinished["cancel_intended"].any()
    assert len(cancelled) + len(refused) + len(unfinished) == len(load) and len(cancelled)
    assert cancelled["cancel_intended"].all()
    mid_prefill = cancelled[cancelled["http_status"].isna()]  # hung up before the status line (first token)
    mid_decode = cancelled[cancelled["http_status"] == 200]
    assert len(mid_prefill) and len(mid_decode) and mid_decode["ttft_s"].notna().all()

    # Joined by the client's label (X-Request-Id): every cancelled request the engine received
    # either had its cancel received there or had already ended there on its own (refused at
    # arrival, say, while the client was hanging up). A client that hangs up before the server
    # has read its request (30 ms after sending, on a loaded machine) leaves nothing to cancel.
    events = record.events
    arrived = engine_arrivals(events)
    reached = {arrived[label] for label in cancelled["request_id"] if label in arrived}
    cancels_received = set(events.loc[events["kind"] == "cancel_received", "request_id"])
    ended_alone = set(
        events.loc[
            (events["kind"] == "rejected") | ((events["kind"] == "finished") & (events["reason"] != "cancelled")),
            "request_id",
        ]
    )
    assert cancels_received <= reached and reached - cancels_received <= ended_alone and len(cancels_received)
    released = events[(events["kind"] == "blocks_released") & events["latency_s"].notna()]  # timed from a cancel
    assert set(released["request_id"]) == cancels_received

    final = record.meta.final
    assert final["requests_in_engine"] == 0 and final["orphan_blocks"] == 0
    assert final["live_blocks"] == final["retained_blocks"] == final["pinned_blocks"]  # only the pinned prefix
    verdict = read_verdict(run_dir)
    assert verdict is not None and verdict.result("no_orphans").outcome.value == "pass"
    assert verdict.result("explicit_overflow").outcome.value == "pass"  # intended cancels are not failures
