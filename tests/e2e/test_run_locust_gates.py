"""A plain locust run with --kvgate-record-dir ends like `kvgate run`: a run record, the verdict
table, and locust's exit code from the gates (0 pass, 1 a gate failed); an explicit refusal is a
REJECTED request in locust's table, never a failure; an open loop's account reaches the record."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.locust_process import OPEN_LOOP_LOCUSTFILE
from record.run_record import RunRecord
from tests.e2e.run_support import SCENARIOS, assert_each_scheduled_request_once, locust
from tests.integration.server_process import ADMIN_KEY, SYSTEM_PROMPT, running_server

pytestmark = pytest.mark.slow


def plain_run(base: str, tenants: str, record_dir: Path):
    return locust(
        "-f",
        str(SCENARIOS / "short_qa.py"),
        "--headless",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "4s",
        "--host",
        base,
        "--stop-timeout",
        "5",
        "--only-summary",
        "--kvgate-model",
        "kvgate-tiny",
        "--kvgate-system-prompt",
        SYSTEM_PROMPT,
        "--kvgate-tenants",
        tenants,
        "--kvgate-admin-key",
        ADMIN_KEY,
        "--kvgate-record-dir",
        str(record_dir),
    )


def test_a_plain_locust_run_is_recorded_judged_and_exits_with_the_gates_code(tmp_path: Path) -> None:
    with running_server(tmp_path) as base:
        served = plain_run(base, "acme=sk-acme:interactive", tmp_path / "served")
        refused = plain_run(base, "tiny=sk-tiny:interactive", tmp_path / "refused")  # a cap that holds nothing

    assert served.returncode == 0, served.stdout[-3000:] + served.stderr[-3000:]
    record = RunRecord.load(tmp_path / "served")
    assert record.meta.mode == "live" and record.meta.pressure is not None and record.meta.signals.engine_events
    assert [p.name for p in record.meta.phases] == ["load", "cooldown"]  # a plain run has no baseline phase
    ok = record.requests[record.requests["status"] == "ok"]
    load = record.meta.phase("load")
    assert len(ok) > 0 and (ok["sent_s"] >= load.start_s).all() and (ok["sent_s"] <= load.end_s).all()
    assert set(ok["engine_request_id"]) <= set(record.events["request_id"])  # the engine's view of every one
    assert (tmp_path / "served" / "verdict.json").exists() and (tmp_path / "served" / "report.html").exists()
    assert "PASS" in served.stdout

    assert refused.returncode == 1, refused.stdout[-3000:] + refused.stderr[-3000:]
    rows = RunRecord.load(tmp_path / "refused").requests
    answered = rows[rows["error_code"] != "run_stopped"]  # a user waiting out Retry-After at the end
    assert len(answered) and (answered["error_code"] == "tenant_quota").all()
    assert "goodput" in refused.stdout and "FAIL" in refused.stdout
    assert "REJECTED" in refused.stderr and "RequestFailed('429" not in refused.stderr  # refusals are no failures


def test_an_open_loop_from_plain_locust_on_two_processes_is_recorded_with_its_account(tmp_path: Path) -> None:
    """The open loop's locustfile run by hand: its schedule, senders and lag reach the record."""
    with running_server(tmp_path) as base:
        result = locust(
            *("-f", str(OPEN_LOOP_LOCUSTFILE), "--headless", "--processes", "2", "--host", base, "-t", "3s"),
            *("--only-summary", "--kvgate-rate", "10", "--kvgate-arrivals", "constant", "--kvgate-max-lag-ms", "5000"),
            *("--kvgate-model", "kvgate-tiny", "--kvgate-system-prompt", SYSTEM_PROMPT),
            *("--kvgate-tenants", "acme=sk-acme:interactive", "--kvgate-record-dir", str(tmp_path / "open")),
        )
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    record = RunRecord.load(tmp_path / "open")
    assert_each_scheduled_request_once(record, {"w0", "w1"})
    assert record.meta.model_extra["live"]["open_loop"]["num_scheduled"] == 30  # 10/s for the 3 s of -t
