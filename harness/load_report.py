"""What the locust master's report and the rows say about who sent a load, and whether an open
loop kept its schedule: `meta.live.load_workers`, `meta.live.open_loop`, and the notes.

    report = read_load_report(run_dir / "load.json")        # what the master wrote (plugin.py)
    account = account_for(report, rows, max_lag_ms=50.0, max_in_flight=256)
    live |= account.live; notes += account.notes

The master reports its roll (load_workers.py: each process that sent, its kvgate, its clock
offset, whether it was lost) and, for an open loop, the schedule's account (dealer.py: what was
dealt to each sender and what came back). The rows give each request's intended and actual send
time and the sender that sent it. From both, a load that cannot be judged is a harness error
(a note starting HARNESS_ERROR: the record is kept, never judged, harness/judge.py):

    a locust worker lost mid-run       its last requests (closed loop) or what was dealt to it
                                       (open loop) are not in the record
    an open loop not sent whole        scheduled requests never recorded, named per sender (their
                                       schedule indices), or a schedule that was not all dealt
    a request recorded twice           the schedule was not sent exactly once
    a sender that lagged               its P99 client lag above the bound: the bound is judged per
                                       sender, because one process that fell behind sent its share
                                       into a target that had had more time to drain, whatever
                                       the others did (loadgen/client_lag.py)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.loadgen.client_lag import summarize_lag
from record.query import percentile
from record.run_record import HARNESS_ERROR

NUM_INDICES_SHOWN = 10


def read_load_report(path: Path) -> dict[str, Any] | None:
    """The master's report, or None when it wrote none (it never started)."""
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None


def missing_workers(report: Mapping[str, Any] | None, *, expected: int, waited_s: float) -> str | None:
    """Why a run that waited for workers never began, or None when it began with them all."""
    if expected <= 0 or (report is not None and report.get("started")):
        return None
    workers = (report or {}).get("workers", {})
    refused = (report or {}).get("refused", [])
    said = f"waited {waited_s:.0f} s for {expected} locust worker(s); {len(workers)} connected and admitted"
    if refused:
        master = (report or {}).get("master", {})
        said += "; refused: " + "; ".join(
            f"{r['client_id']} (kvgate {r['kvgate']}, scenario files {r['scenarios']})" for r in refused
        )
        said += f" — this master runs kvgate {master.get('kvgate')} with scenario files {master.get('scenarios')}"
    return said + ": start them with `kvgate worker --master HOST:PORT` (docs/load.md)"


@dataclass
class LoadAccount:
    live: dict[str, Any] = field(default_factory=dict)
    """meta.live's `load_workers` and, for an open loop, `open_loop`."""
    notes: list[str] = field(default_factory=list)
    origin_unix: float | None = None
    """An open loop's time 0 (the master's clock): where its load phase begins."""


def account_for(
    report: Mapping[str, Any] | None, rows: pd.DataFrame, *, max_lag_ms: float, max_in_flight: int
) -> LoadAccount:
    """The account of one load (module docstring); `rows`: the load phase's requests."""
    account = LoadAccount()
    if report is None:
        return account
    workers: dict[str, Any] = report.get("workers", {})
    account.live["load_workers"] = workers
    lost = sorted(name for name, w in workers.items() if w.get("lost"))
    open_loop = report.get("open_loop")
    if lost and open_loop is None:
        account.notes.append(
            f"{HARNESS_ERROR}: locust worker(s) {', '.join(lost)} were lost mid-run: the requests they had in "
            f"flight are not in the record"
        )
    if open_loop is not None:
        _account_open_loop(account, open_loop, rows, lost, max_lag_ms=max_lag_ms, max_in_flight=max_in_flight)
    return account


def _account_open_loop(
    account: LoadAccount,
    report: Mapping[str, Any],
    rows: pd.DataFrame,
    lost: list[str],
    *,
    max_lag_ms: float,
    max_in_flight: int,
) -> None:
    scheduled = rows[rows["intended_s"].notna()]
    schedule: Mapping[str, Any] = report.get("schedule") or {}
    per_sender: dict[str, Any] = {}
    late = []
    for sender, counts in schedule.get("per_sender", {}).items():
        mine = scheduled[scheduled["load_worker"] == sender]
        lag = summarize_lag(list(mine["sent_s"] - mine["intended_s"]), max_lag_ms)
        peak = peak_in_flight(mine)
        per_sender[sender] = {**counts, "lost": sender in lost, "peak_in_flight": peak, "client_lag": lag.to_dict()}
        if not lag.is_within:
            full = f" (all {max_in_flight} places in flight were taken at once)" if peak >= max_in_flight else ""
            late.append(f"{sender}: {lag.explain()}{full}")
    overall = summarize_lag(list(scheduled["sent_s"] - scheduled["intended_s"]), max_lag_ms)
    account.origin_unix = report.get("origin_unix")
    account.live["open_loop"] = {
        **report.get("workload", {}),
        "duration_s": report.get("duration_s"),
        "num_scheduled": schedule.get("num_dealt", 0),
        "num_sent": len(scheduled),
        "max_in_flight": max_in_flight,
        "peak_in_flight": max((s["peak_in_flight"] for s in per_sender.values()), default=0),
        "client_lag": overall.to_dict(),
        "senders": per_sender,
        **ttft_summary(scheduled),
    }
    if late:
        account.notes.append(
            f"{HARNESS_ERROR}: the client could not keep its schedule: {'; '.join(late)} — lower the rate, raise "
            f"--max-in-flight, or add locust worker processes (--processes, kvgate worker)"
        )
    account.notes += _unsent(report, schedule, lost)
    if cut := int((scheduled["error_code"] == "run_stopped").sum()):
        account.notes.append(f"{cut} open-loop request(s) still open at the end of the drain were cut")


def _unsent(report: Mapping[str, Any], schedule: Mapping[str, Any], lost: list[str]) -> list[str]:
    """Harness errors for what the schedule did not send exactly once."""
    notes = []
    if report.get("problem"):
        notes.append(f"{HARNESS_ERROR}: the open-loop schedule was not sent: {report['problem']}")
    elif schedule and not schedule.get("is_exhausted", False):
        notes.append(f"{HARNESS_ERROR}: the run ended before the open-loop schedule was all sent")
    owed: dict[str, list[int]] = schedule.get("owed", {})
    if owed:
        num_owed = sum(len(indices) for indices in owed.values())
        parts = []
        for sender, indices in sorted(owed.items()):
            why = "lost mid-run" if sender in lost else "never sent them or never recorded them"
            shown = ", ".join(map(str, indices[:NUM_INDICES_SHOWN]))
            shown += ", ..." if len(indices) > NUM_INDICES_SHOWN else ""
            parts.append(f"{sender} ({why}): {len(indices)}, schedule indices {shown}")
        notes.append(
            f"{HARNESS_ERROR}: {num_owed} of {schedule.get('num_dealt', 0)} scheduled requests were never "
            f"recorded: {'; '.join(parts)}"
        )
    if schedule.get("num_duplicates"):
        notes.append(f"{HARNESS_ERROR}: {schedule['num_duplicates']} scheduled request(s) were recorded twice")
    return notes


def peak_in_flight(rows: pd.DataFrame) -> int:
    """The most requests open at once: sends and ends swept in time order (an end before a send
    at the same instant)."""
    ends = rows["done_s"].fillna(rows["sent_s"])
    events = sorted([(t, 1) for t in rows["sent_s"]] + [(t, -1) for t in ends])
    open_now = peak = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    return peak


def ttft_summary(rows: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """TTFT percentiles from the actual and from the intended send time: the second is what a
    user who arrived on schedule waited."""
    answered = rows[rows["ttft_s"].notna()]
    lag_s = answered["sent_s"] - answered["intended_s"]
    return {
        "ttft_ms_from_sent": _percentiles(answered["ttft_s"]),
        "ttft_ms_from_intended": _percentiles(answered["ttft_s"] + lag_s),
    }


def _percentiles(values_s: pd.Series) -> dict[str, float | None]:
    if values_s.empty:
        return {"p50": None, "p95": None, "p99": None}
    ms = np.asarray(values_s, dtype=float) * 1000.0
    return {f"p{q}": percentile(ms, q) for q in (50, 95, 99)}
