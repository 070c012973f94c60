"""The load phase of a live run when the load is open loop (`kvgate run --rate` / `--trace`,
`kvgate sweep`): the workload's arrivals sent at their intended times from this process.

    window = run_open_load(plan.open_loop, base_url=..., settings=..., tenants=..., duration_s=60, ...)

Rows go to the record's requests.csv as they come back, with `intended_s` beside `sent_s`. The
phase ends when every request sent has its answer, or `request_timeout_s` + `DRAIN_MARGIN_S`
after the last was sent (what is still open then is cut, and a note says how many). What the
run record keeps under `meta.live.open_loop`: the workload, the client lag (loadgen/client_lag.py)
and TTFT percentiles measured from the actual and from the intended send time, so a reader sees
what coordinated omission would have hidden. A run whose client lag passed the bound gets a
note starting with `HARNESS_ERROR`: it is kept, and never judged (harness/judge.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from harness.loadgen.client_lag import MAX_LAG_P99_MS, summarize_lag
from harness.loadgen.open_loop import INTENDED_COLUMN, OpenLoopClient, Workload, dispatch
from harness.loadgen.request_log import tally
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet
from record.query import percentile
from record.run_record import HARNESS_ERROR, RunRecordWriter

if TYPE_CHECKING:
    from harness.live_run import RunProgress

DRAIN_MARGIN_S = 10.0
DEFAULT_MAX_IN_FLIGHT = 256
PROGRESS_INTERVAL_S = 0.5


@dataclass(frozen=True, kw_only=True)
class OpenLoad:
    """An open-loop load: what to send, and the client's limits."""

    workload: Workload
    max_lag_ms: float = MAX_LAG_P99_MS
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT


@dataclass(frozen=True)
class OpenLoadResult:
    start_s: float
    end_s: float
    counts: Counter[str]
    summary: dict[str, Any]
    """meta.live.open_loop"""
    notes: list[str]


def run_open_load(
    load: OpenLoad,
    *,
    base_url: str,
    settings: LoadSettings,
    tenants: TenantSet,
    duration_s: float,
    writer: RunRecordWriter,
    progress: RunProgress,
    clock: Callable[[], float],
    started_unix: float,
    usage: Callable[[], float | None],
    transport: httpx.BaseTransport | None = None,
) -> OpenLoadResult:
    """Send the workload, record every answer; the load window is [first intended send, last answer].
    `transport`: a test seam (httpx.MockTransport)."""
    counts, rows = Counter[str](), list[dict[str, Any]]()

    def on_row(row: Mapping[str, Any]) -> None:
        writer.append("requests", [row])
        tally(counts, [row])
        rows.append(dict(row))

    shown = [0.0]

    def show() -> None:
        if clock() - shown[0] >= PROGRESS_INTERVAL_S:
            shown[0] = clock()
            progress.load(clock() - start_s, duration_s, counts, usage())

    progress.phase("load", f"open loop, {load.workload.name}, {duration_s:.0f} s")
    start_s = clock()  # until the schedule starts (after its first second of prompts is made)
    client = OpenLoopClient(
        base_url,
        timeout_s=settings.request_timeout_s,
        max_in_flight=load.max_in_flight,
        origin_unix=started_unix,
        on_row=on_row,
        transport=transport,
    )
    notes: list[str] = []
    try:
        sent = dispatch(load.workload.arrivals(settings, tenants, duration_s), client.submit, on_wait=show)
        start_s = sent.origin_unix - started_unix
        deadline = clock() + settings.request_timeout_s + DRAIN_MARGIN_S
        while (num_open := client.drain(PROGRESS_INTERVAL_S)) and clock() < deadline:
            show()
        if num_open:
            waited_s = settings.request_timeout_s + DRAIN_MARGIN_S
            notes.append(
                f"{num_open} open-loop request(s) still open {waited_s:.0f} s after the last was sent were cut"
            )
    finally:
        client.close()
    end_s = clock()
    lag = summarize_lag([row["sent_s"] - row[INTENDED_COLUMN] for row in rows], load.max_lag_ms)
    summary = {
        **load.workload.describe(),
        "num_sent": sent.num_sent,
        "max_in_flight": load.max_in_flight,
        "peak_in_flight": client.peak_in_flight,
        "client_lag": lag.to_dict(),
        **ttft_summary(rows),
    }
    if not lag.is_within:
        full = (
            f"; all {load.max_in_flight} sending threads were busy at once (the target answered slower than "
            f"requests arrived: raise --max-in-flight, or lower the rate)"
            if client.peak_in_flight >= load.max_in_flight
            else ""
        )
        notes.append(f"{HARNESS_ERROR}: the client could not keep its schedule: {lag.explain()}{full}")
    return OpenLoadResult(start_s, end_s, counts, summary, notes)


def ttft_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """TTFT percentiles from the actual and from the intended send time: the second is what a
    user who arrived on schedule waited."""
    answered = [(row["ttft_s"], row["sent_s"] - row[INTENDED_COLUMN]) for row in rows if row["ttft_s"] is not None]
    return {
        "ttft_ms_from_sent": _percentiles([t for t, _ in answered]),
        "ttft_ms_from_intended": _percentiles([t + lag for t, lag in answered]),
    }


def _percentiles(values_s: list[float]) -> dict[str, float | None]:
    if not values_s:
        return {"p50": None, "p95": None, "p99": None}
    ms = np.asarray(values_s) * 1000.0
    return {f"p{q}": percentile(ms, q) for q in (50, 95, 99)}
