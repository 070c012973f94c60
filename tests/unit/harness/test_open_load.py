"""An open-loop load phase in-process, against a mock transport: rows, lag summary, harness error."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from harness.judge import PartialRecord, judge
from harness.loadgen.arrivals import ArrivalKind, Arrivals
from harness.loadgen.chat_workload import ChatWorkload
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant, TenantSet
from harness.open_load import OpenLoad, OpenLoadResult, run_open_load
from record.run_record import HARNESS_ERROR, RunMeta, RunRecord, RunRecordWriter


class Quiet:
    def phase(self, name: str, detail: str = "") -> None: ...

    def load(self, elapsed_s: float, total_s: float, counts: Mapping[str, int], usage: float | None) -> None: ...


def sse_server(answer_s: float = 0.0) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        time.sleep(answer_s)
        chunks = [
            {"id": "c", "choices": [{"delta": {"content": "yes"}}]},
            {"id": "c", "choices": [{"delta": {}, "finish_reason": "stop"}]},
        ]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handle)


def load_into(run_dir: Path, max_lag_ms: float, max_in_flight: int = 4, answer_s: float = 0.0) -> OpenLoadResult:
    """Ten chat requests, constant arrivals at 50/s, each answered after `answer_s`, into a
    record written under `run_dir`."""
    started = time.time()
    load = OpenLoad(
        workload=ChatWorkload(schedule=Arrivals(kind=ArrivalKind.CONSTANT, rate_per_s=50.0)),
        max_lag_ms=max_lag_ms,
        max_in_flight=max_in_flight,
    )
    tenants = TenantSet([Tenant("acme", "sk-acme"), Tenant("bulk", "sk-bulk", "batch")])
    with RunRecordWriter(run_dir) as writer:
        result = run_open_load(
            load,
            base_url="http://engine",
            settings=LoadSettings(prompt_tokens=40, model="m"),
            tenants=tenants,
            duration_s=0.2,
            writer=writer,
            progress=Quiet(),
            clock=lambda: time.time() - started,
            started_unix=started,
            usage=lambda: None,
            transport=sse_server(answer_s),
        )
        writer.write_meta(
            RunMeta(
                run_id="open", mode="live", started_unix=started, notes=result.notes, live={"open_loop": result.summary}
            )
        )
    return result


def test_every_request_is_one_row_with_its_intended_time(tmp_path: Path) -> None:
    result = load_into(tmp_path, max_lag_ms=math.inf)  # no lag bound: rows, not the client's speed
    rows = RunRecord.load(tmp_path).requests
    assert result.counts["ok"] == 10 and len(rows) == 10
    schedule = sorted(rows["intended_s"] - result.start_s)  # the load window opens at the schedule's 0
    assert schedule == pytest.approx([n / 50 for n in range(10)], abs=1e-6)
    assert set(rows["tenant"]) == {"acme"}  # interactive tenants only: critical chat
    assert result.summary["num_sent"] == 10 and result.summary["client_lag"]["num_requests"] == 10
    assert 1 <= result.summary["peak_in_flight"] <= 4
    from_sent, from_intended = result.summary["ttft_ms_from_sent"], result.summary["ttft_ms_from_intended"]
    assert from_intended["p95"] >= from_sent["p95"] and result.notes == []


def test_a_lag_above_the_bound_is_a_harness_error_never_judged(tmp_path: Path) -> None:
    result = load_into(tmp_path, max_lag_ms=1e-9)  # no thread hands over in a picosecond
    assert any(note.startswith(HARNESS_ERROR) for note in result.notes)
    assert result.summary["peak_in_flight"] <= 4
    with pytest.raises(PartialRecord, match="harness error: the client could not keep its schedule"):
        judge(tmp_path)


def test_a_client_whose_threads_are_all_busy_says_so(tmp_path: Path) -> None:
    """One thread, answers of 100 ms, arrivals every 20 ms: requests wait for the thread."""
    result = load_into(tmp_path, max_lag_ms=50.0, max_in_flight=1, answer_s=0.1)
    assert result.summary["peak_in_flight"] == 1 and result.summary["client_lag"]["num_late"] >= 5
    assert any("all 1 sending threads were busy at once" in note for note in result.notes)


class Trickle(httpx.SyncByteStream):
    """A stream that sends a content chunk every 20 ms for 30 s: no per-read timeout ever trips."""

    def __init__(self) -> None:
        self.closed = False

    def __iter__(self):
        yield b'data: {"id": "c", "choices": [{"delta": {"content": "yes"}}]}\n\n'
        for _ in range(1500):
            if self.closed:
                return
            time.sleep(0.02)
            yield b'data: {"id": "c", "choices": [{"delta": {"content": " more"}}]}\n\n'

    def close(self) -> None:
        self.closed = True


def test_a_trickling_stream_ends_at_the_request_timeout_as_a_timeout(tmp_path: Path) -> None:
    streams: list[Trickle] = []

    def handle(request: httpx.Request) -> httpx.Response:
        streams.append(Trickle())
        return httpx.Response(200, stream=streams[-1], headers={"content-type": "text/event-stream"})

    started = time.time()
    load = OpenLoad(
        workload=ChatWorkload(schedule=Arrivals(kind=ArrivalKind.CONSTANT, rate_per_s=10.0)), max_lag_ms=math.inf
    )
    with RunRecordWriter(tmp_path) as writer:
        result = run_open_load(
            load,
            base_url="http://engine",
            tenants=TenantSet([Tenant("acme", "sk-acme")]),
            settings=LoadSettings(prompt_tokens=40, model="m", request_timeout_s=0.3),
            duration_s=0.2,
            writer=writer,
            progress=Quiet(),
            clock=lambda: time.time() - started,
            started_unix=started,
            usage=lambda: None,
            transport=httpx.MockTransport(handle),
        )
    assert result.counts["timeout"] == 2 and result.notes == [] and result.summary["peak_in_flight"] == 2
    assert all(stream.closed for stream in streams)
