"""The open-loop section: lag and TTFT from the intended send for an open-loop record, a note otherwise."""

from __future__ import annotations

from pathlib import Path

from gates import evaluate
from record.run_record import Phase, RunMeta, RunRecord, RunRecordWriter
from reports.sections.open_loop import OpenLoopSection


def record(tmp_path: Path, open_loop: bool) -> RunRecord:
    rows = [
        {
            "request_id": f"r{n}",
            "scenario": "open_loop_chat",
            "phase": "load",
            "tenant": "acme",
            "traffic_class": "interactive",
            "status": "ok",
            "sent_s": n + 0.01 * n,
            "ttft_s": 0.1,
            "first_token_s": n + 0.01 * n + 0.1,
            "intended_s": float(n) if open_loop else None,
        }
        for n in range(20)
    ]
    with RunRecordWriter(tmp_path) as writer:
        writer.append("requests", rows)
        writer.write_meta(
            RunMeta(
                run_id="r",
                mode="live",
                started_unix=0.0,
                phases=[Phase(name="load", start_s=0.0, end_s=20.0)],
                live={"open_loop": {"client_lag": {"bound_ms": 50.0}}} if open_loop else {},
            )
        )
    return RunRecord.load(tmp_path)


def test_an_open_loop_record_shows_lag_and_ttft_from_the_intended_send(tmp_path: Path) -> None:
    rec = record(tmp_path, open_loop=True)
    html = OpenLoopSection().render(rec, evaluate(rec))
    assert "20 requests sent on a schedule; P99 client lag 190.0 ms against a bound of 50 ms" in html
    assert "TTFT from the intended send, ms" in html and 'id="fig-open-loop"' in html


def test_a_closed_loop_record_says_it_has_no_intended_times(tmp_path: Path) -> None:
    rec = record(tmp_path, open_loop=False)
    assert "closed loop" in OpenLoopSection().render(rec, evaluate(rec))
