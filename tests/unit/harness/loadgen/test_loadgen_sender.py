"""A locust process's open-loop sender, against a fake transport on gevent: every slot dealt is
sent once and never before its time, a full pool shows as lag, and a stop cuts what is in flight."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping

import gevent

from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.schedule import ChatText, Slot
from harness.loadgen.sender import Sender
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant, TenantSet

TENANTS = TenantSet([Tenant("acme", "sk-acme")])
CHUNKS = [{"id": "c", "choices": [{"delta": {"content": "yes"}}]}, {"id": "c", "choices": [{"finish_reason": "stop"}]}]


class Answer:
    """An SSE answer that takes `answer_s` before its first line."""

    status = 200
    headers: Mapping[str, str] = {"content-type": "text/event-stream"}

    def __init__(self, answer_s: float, on_close: Callable[[], None] = lambda: None) -> None:
        self._lines = [f"data: {json.dumps(c)}\n".encode() for c in CHUNKS] + [b"data: [DONE]\n"]
        self._answer_s = answer_s
        self._on_close = on_close

    def readline(self) -> bytes:
        if self._answer_s:
            gevent.sleep(self._answer_s)
            self._answer_s = 0.0
        return self._lines.pop(0) if self._lines else b""

    def read_all(self) -> bytes:
        return b""

    def close(self) -> None:
        self._on_close()


class Target:
    """The fake transport: each request answered after `answer_s`."""

    def __init__(self, answer_s: float = 0.0) -> None:
        self.answer_s = answer_s
        self.num_opened = self.num_closed = 0
        self.in_flight_at_open: list[int] = []

    def open(self, path: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        self.in_flight_at_open.append(self.num_opened - self.num_closed)
        self.num_opened += 1
        return Answer(self.answer_s, on_close=self._closed)

    def _closed(self) -> None:
        self.num_closed += 1

    def deadline(self, seconds: float, error: BaseException) -> gevent.Timeout:
        return gevent.Timeout(seconds, error)


def slots(times: list[float]) -> list[Slot]:
    return [Slot(n, t, f"r-{n}", "open_loop_chat", "acme", 4, ChatText(40, f"r-{n}")) for n, t in enumerate(times)]


def send(schedule: list[Slot], target: Target, *, max_in_flight: int = 16, run_s: float) -> list[RequestOutcome]:
    rows: list[RequestOutcome] = []
    settings = LoadSettings(model="m", max_in_flight=max_in_flight, request_timeout_s=5.0)
    sender = Sender("http://target", settings, TENANTS, record=rows.append, transport=target)
    origin = time.time() + 0.05
    sender.receive(origin, schedule[: len(schedule) // 2])  # two deals, as the master deals ahead
    sender.receive(origin, schedule[len(schedule) // 2 :])
    loop = gevent.spawn(lambda: [sender.run(for_s=0.1) for _ in range(round(run_s / 0.1))])
    loop.join()
    gevent.sleep(0.3)  # the last answers
    sender.stop()
    return rows


def test_every_slot_is_sent_once_and_never_before_its_time() -> None:
    schedule = slots([n * 0.01 for n in range(20)] + [0.25] * 5)  # a burst of five at the end
    rows = send(schedule, Target(), run_s=0.6)
    assert sorted(r.request_id for r in rows) == sorted(s.request_id for s in schedule)
    assert all(r.status == "ok" and r.intended_unix is not None for r in rows)
    assert all(r.sent_unix >= r.intended_unix for r in rows if r.intended_unix is not None)


def test_a_full_pool_sends_late_and_the_rows_say_how_late() -> None:
    """One place in flight, answers of 100 ms, arrivals every 20 ms: requests wait for the place."""
    target = Target(answer_s=0.1)
    rows = send(slots([n * 0.02 for n in range(6)]), target, max_in_flight=1, run_s=1.0)
    assert len(rows) == 6 and target.in_flight_at_open == [0] * 6  # each waited for the answer before it
    by_slot = sorted(rows, key=lambda r: r.request_id)
    lags = [r.sent_unix - r.intended_unix for r in by_slot if r.intended_unix is not None]
    assert len(lags) == 6 and lags == sorted(lags) and lags[0] < lags[-1]  # each row says it waited longer


def test_a_stop_cuts_what_is_in_flight_with_one_row_each() -> None:
    rows: list[RequestOutcome] = []
    target = Target(answer_s=30.0)
    sender = Sender("http://target", LoadSettings(model="m"), TENANTS, record=rows.append, transport=target)
    sender.receive(time.time(), slots([0.0, 0.0, 0.0, 60.0]))
    gevent.spawn(sender.run, for_s=0.2).join()
    sender.stop()
    assert target.num_opened == 3 and sender.num_unsent == 1
    assert sorted(r.error_code for r in rows) == ["run_stopped"] * 3


def test_a_second_user_in_the_process_does_not_send_twice() -> None:
    rows: list[RequestOutcome] = []
    sender = Sender("http://target", LoadSettings(model="m"), TENANTS, record=rows.append, transport=Target())
    sender.receive(time.time(), slots([0.0, 0.05, 0.1]))
    gevent.joinall([gevent.spawn(sender.run, for_s=0.3) for _ in range(2)])
    gevent.sleep(0.1)
    sender.stop()
    assert sorted(r.request_id for r in rows) == ["r-0", "r-1", "r-2"]
