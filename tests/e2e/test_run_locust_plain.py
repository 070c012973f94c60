"""Plain locust runs the scenarios against a started engine: headless, mixed default, and with
--processes (workers forward every row to the master, each recorded once, also beside busy
loops: counts, never timings)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pandas as pd
import pytest

from record.run_record import REQUEST_COLUMNS
from tests.e2e.run_support import SCENARIOS, STATUSES, cpu_hogs, engine_arrivals, locust
from tests.integration.server_process import ADMIN, ADMIN_KEY, SYSTEM_PROMPT, running_server

pytestmark = pytest.mark.slow

TINY = [
    "--kvgate-model",
    "kvgate-tiny",
    "--kvgate-system-prompt",
    SYSTEM_PROMPT,
    "--kvgate-admin-key",
    ADMIN_KEY,
    "--kvgate-tenants",
    "acme=sk-acme:interactive,globex=sk-globex:interactive",
    "--kvgate-long-prompt-tokens",
    "2048",
    "--kvgate-long-output-tokens",
    "128",
    "--kvgate-batch-prompt-tokens",
    "512",
    "--kvgate-cancel-prompt-tokens",
    "1024",
    "--kvgate-document-tokens",
    "128",
    "--kvgate-idle-gap-min-s",
    "0.2",
    "--kvgate-idle-gap-max-s",
    "0.5",
    "--kvgate-burst-size",
    "4",
    "--kvgate-kill-interval-s",
    "1",
    # within kvgate-tiny's 4,096-token context: a long multi-turn session's document is 4,096 by default
    "--kvgate-session-context-tokens",
    "256",
    "--kvgate-long-session-context-tokens",
    "1024",
]


def test_the_mixed_default_runs_headless_and_records_every_request(tmp_path: Path) -> None:
    rows_path = tmp_path / "requests.csv"
    with running_server(tmp_path) as base:
        result = locust(
            "-f",
            str(SCENARIOS),
            "--headless",
            "-u",
            "13",  # one user per class of the mixed default: each must send
            "-r",
            "13",
            "-t",
            "6s",
            "--host",
            base,
            "--stop-timeout",
            "5",
            "--only-summary",
            "--kvgate-requests-csv",
            str(rows_path),
            *TINY,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = pd.read_csv(rows_path)
    assert tuple(rows.columns) == REQUEST_COLUMNS
    senders = {
        "batch_mix",
        "cancel_storm",
        "long_output",
        "long_prompt",
        "multi_turn",
        "shared_prefix",
        "short_qa",
        "step_load",
        "tenant_burst",
    }
    # worker_kill, tier_chaos, router_chaos and pd_transfer_chaos send no completions (they stop or sleep here)
    assert set(rows["scenario"]) == senders
    assert set(rows["status"]) <= STATUSES and set(rows["phase"]) == {"load"}
    ok = rows[rows["status"] == "ok"]
    assert len(ok) and ok["ttft_s"].notna().all() and (ok["ttft_s"] <= ok["e2e_s"]).all()
    assert (ok["engine_request_id"].str.startswith("chatcmpl-")).all()
    assert rows["request_id"].is_unique
    assert set(rows.loc[rows["scenario"] == "batch_mix", "traffic_class"]) == {"interactive"}  # no batch tenant given
    assert "worker_kill stops: the engine does not run several workers" in result.stderr
    assert "tier_chaos is off" in result.stderr
    for name in ("ttft/short_qa/interactive", "short_qa/interactive"):
        assert name in result.stderr  # locust's own table (on stderr): the request and its TTFT


def test_with_processes_every_workers_rows_reach_the_master_once_even_on_a_busy_machine(tmp_path: Path) -> None:
    rows_path, stats = tmp_path / "requests.csv", tmp_path / "stats"
    with running_server(tmp_path) as base, cpu_hogs():
        result = locust(
            "-f",
            str(SCENARIOS / "short_qa.py"),
            "--headless",
            "--processes",
            "2",
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "5s",
            "--host",
            base,
            "--stop-timeout",
            "5",
            "--csv",
            str(stats),
            "--kvgate-requests-csv",
            str(rows_path),
            *TINY,
        )
        page = httpx.get(f"{base}/admin/events", headers=ADMIN, timeout=30).json()
    assert result.returncode == 0, result.stderr[-3000:]
    rows = pd.read_csv(rows_path)
    assert len(rows) and rows["request_id"].is_unique
    assert rows["request_id"].str.split("-").str[0].nunique() == 2  # both worker processes contributed
    # every request the engine received has its row (joined by the client's X-Request-Id label) ...
    arrived = engine_arrivals(pd.DataFrame(page["rows"], columns=page["columns"]))
    assert set(arrived) <= set(rows["request_id"])
    # ... and the rest never left the client: users stopped before their request went out
    unsent = rows[~rows["request_id"].isin(arrived)]
    assert (unsent["error_code"] == "run_stopped").all()
    # locust's own count agrees: its last stats report reached the master too
    counted = pd.read_csv(f"{stats}_stats.csv")
    assert counted[counted["Type"].isin(["POST", "CANCEL", "UNFINISHED"])]["Request Count"].sum() == len(rows)


def test_the_step_shape_stops_the_test_once_rejections_begin(tmp_path: Path) -> None:
    rows_path = tmp_path / "requests.csv"
    with running_server(tmp_path) as base:  # tenant `tiny` may hold no KV: every request is a 429
        result = locust(
            "-f",
            str(SCENARIOS / "step_load.py"),
            "--headless",
            "-t",
            "60s",
            "--host",
            base,
            "--kvgate-requests-csv",
            str(rows_path),
            *TINY,
            "--kvgate-tenants",
            "tiny=sk-tiny",
            "--kvgate-step-users",
            "2",
            "--kvgate-step-s",
            "1",
            "--kvgate-step-hold-s",
            "1",
            "--exit-code-on-error",
            "0",
            timeout_s=50,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Shape test stopping" in result.stderr and "--run-time limit reached" not in result.stderr
    rows = pd.read_csv(rows_path)
    answered = rows[rows["error_code"] != "run_stopped"]  # not those the shape's stop cut short
    assert len(answered) and set(zip(answered["http_status"], answered["error_code"])) == {(429, "tenant_quota")}
    assert "REJECTED" in result.stderr  # locust's table counts the refusals apart from failures
