"""The replay loop: arrivals, refusals, samples on a fixed grid through idle gaps, max_tokens."""

import pytest

from harness.replay.driver import Arrival, MaxTokens, ReplayDriver, ReplayStalled
from harness.replay.trace import TraceRequest
from reference_engine import EngineCore, StepOutput, VirtualClock
from tests.helpers import small_config


class ListSink:
    def __init__(self) -> None:
        self.tables: dict[str, list[dict]] = {}

    def append(self, table, rows) -> None:
        self.tables.setdefault(table, []).extend(rows)


def drive(rows, max_tokens=MaxTokens.TRACE, interval_s=1.0, step_by_step=False, **config):
    clock = VirtualClock()
    core = EngineCore(small_config(1024, **config), clock=clock)
    arrivals = [Arrival(TraceRequest(i + 1, t, prompt, out), tenant) for i, (t, tenant, prompt, out) in enumerate(rows)]
    sink = ListSink()
    stats = ReplayDriver(
        core,
        clock,
        arrivals,
        sink,
        mapper=None,
        max_tokens=max_tokens,
        sample_interval_s=interval_s,
        step_by_step=step_by_step,
        scenario="test",
    ).run()
    return core, stats, sink.tables


def test_samples_follow_a_fixed_grid_through_idle_gaps_and_end_drained():
    core, stats, tables = drive([(0.0, "acme", 100, 8), (30.0, "globex", 100, 8)])
    times = [s["t_s"] for s in tables["samples"]]
    assert times == [float(t) for t in range(len(times))]
    assert stats.last_arrival_s == 30.0 and stats.last_sample_s == times[-1] >= stats.end_s > 30.0
    assert tables["samples"][-1]["live_blocks"] == 0 and tables["samples"][-1]["num_running"] == 0
    assert tables["samples"][0]["live_blocks"] > 0  # the first request holds blocks at t = 0
    assert len(tables["tenant_samples"]) == len(times) * 4  # every configured tenant at every sample
    assert [e["seq"] for e in tables["events"]] == list(range(core.events.next_cursor))
    assert [r["status"] for r in tables["requests"]] == ["ok", "ok"]


def test_a_request_refused_at_arrival_is_an_error_row_at_its_arrival():
    core, stats, tables = drive([(2.0, "acme", 5000, 8)])  # far over acme's 15 % of 1,024 blocks
    [row] = tables["requests"]
    assert (row["sent_s"], row["done_s"], row["status"], row["error_code"]) == (2.0, 2.0, "error", "tenant_quota")
    assert stats.num_refused == 1


@pytest.mark.parametrize(
    "mode, max_tokens, completion, reason",
    [
        (MaxTokens.TRACE, 100, 100, "stop"),  # the trace's own output length
        (MaxTokens.UNSET, None, 64, "length"),  # the engine's default (64 in the test config) caps it
    ],
)
def test_max_tokens_mode(mode, max_tokens, completion, reason):
    _, _, tables = drive([(0.0, "acme", 50, 100)], max_tokens=mode)
    [row] = tables["requests"]
    assert (row["max_tokens"], row["completion_tokens"], row["finish_reason"]) == (max_tokens, completion, reason)


def test_sample_interval_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        drive([(0.0, "acme", 10, 2)], interval_s=0.0)


def test_an_engine_that_can_never_start_its_work_stops_the_replay_with_an_error(monkeypatch):
    clock = VirtualClock()
    core = EngineCore(small_config(1024), clock=clock)
    monkeypatch.setattr(
        core, "step", lambda until_s=None, observe_s=(): StepOutput(clock.now(), clock.now())
    )  # never runs
    monkeypatch.setattr(core, "next_timer_s", lambda: None)  # and nothing will ever change by itself
    driver = ReplayDriver(
        core,
        clock,
        [Arrival(TraceRequest(1, 0.0, 100, 8), "acme")],
        ListSink(),
        mapper=None,
        max_tokens=MaxTokens.TRACE,
        sample_interval_s=1.0,
        step_by_step=False,
        scenario="test",
    )
    with pytest.raises(ReplayStalled, match="1 waiting request\\(s\\) it cannot start"):
        driver.run()
