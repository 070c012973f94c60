"""dispatch on a fake clock: sends never early, lag recorded when the client falls behind."""

from __future__ import annotations

from harness.loadgen.client_lag import summarize_lag
from harness.loadgen.exchange import Call
from harness.loadgen.open_loop import INTENDED_COLUMN, Arrival, dispatch, open_loop_row
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.prompts import chat_prompt
from harness.loadgen.tenants import Tenant


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def arrivals(times: list[float]) -> list[Arrival]:
    tenant = Tenant("acme", "sk-acme")
    return [
        Arrival(
            t,
            Call(
                request_id=f"r{n}",
                scenario="s",
                phase="load",
                tenant=tenant,
                model="m",
                prompt=chat_prompt(8, seed=n),
                max_tokens=4,
            ),
        )
        for n, t in enumerate(times)
    ]


def test_each_arrival_is_sent_at_its_intended_time() -> None:
    clock, sent = FakeClock(), []
    result = dispatch(
        arrivals([0.0, 0.5, 0.5, 2.0]),
        lambda a, due: sent.append((a.call.request_id, due, clock())),
        clock=clock,
        sleep=clock.sleep,
    )
    assert result.num_sent == 4 and result.origin_unix == 100.0
    assert [(rid, due - 100.0, at - 100.0) for rid, due, at in sent] == [
        ("r0", 0.0, 0.0),
        ("r1", 0.5, 0.5),
        ("r2", 0.5, 0.5),
        ("r3", 2.0, 2.0),
    ]


def test_a_client_that_falls_behind_records_its_lag() -> None:
    """Each send blocks the schedule for 0.3 s (a client with one thread): arrivals every
    0.1 s leave later and later, and the rows say by how much."""
    clock, rows = FakeClock(), []

    def submit(arrival: Arrival, due: float) -> None:
        outcome = RequestOutcome(
            request_id=arrival.call.request_id,
            scenario="s",
            phase="load",
            tenant="acme",
            traffic_class="interactive",
            sent_unix=clock(),
            ttft_s=0.05,
            e2e_s=0.3,
        )
        rows.append(open_loop_row(outcome, due, origin_unix=100.0))
        clock.now += 0.3

    dispatch(arrivals([0.0, 0.1, 0.2, 0.3]), submit, clock=clock, sleep=clock.sleep)
    lags = [round(row["sent_s"] - row[INTENDED_COLUMN], 6) for row in rows]
    assert [round(row[INTENDED_COLUMN], 6) for row in rows] == [0.0, 0.1, 0.2, 0.3]
    assert lags == [0.0, 0.2, 0.4, 0.6]
    assert clock.sleeps == []  # never ahead of schedule: it never waited
    assert not summarize_lag(lags, bound_ms=50.0).is_within


def test_nothing_to_send() -> None:
    clock = FakeClock()
    assert dispatch([], lambda a, due: None, clock=clock, sleep=clock.sleep).num_sent == 0
