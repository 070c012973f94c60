"""Engine restarts from outside: a new process start time, a /health outage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx

from harness.collectors.engine_restarts import RestartWatch
from harness.collectors.prometheus import Scrape, parse_metrics
from harness.collectors.tenant_estimate import PoolCapacity, scraped_pool

URL = "http://engine.test"


def scripted(answers: list[int | type[Exception]]) -> httpx.MockTransport:
    """/health answers in order: a status code, or an exception raised instead."""
    queue: Iterator[int | type[Exception]] = iter(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/health"
        answer = next(queue)
        if isinstance(answer, int):
            return httpx.Response(answer)
        raise answer("scripted", request=request)

    return httpx.MockTransport(handle)


def started(at_s: float) -> Scrape:
    return Scrape("vllm", {"process_start_s": at_s}, {})


def test_a_new_process_start_time_is_a_restart() -> None:
    watch = RestartWatch(URL, transport=scripted([]))
    for t_s, start in ((1.0, 1_700_000_000.0), (2.0, 1_700_000_000.2), (3.0, 1_700_000_400.0)):
        watch.observe(started(start), t_s)
    events = watch.take_events()
    assert [(e["t_s"], e["kind"], e["reason"]) for e in events] == [(3.0, "engine_restart", "process_start_time")]
    assert watch.take_events() == [] and watch.status().available


def test_a_health_outage_that_ends_is_one_restart_and_a_slow_answer_is_none() -> None:
    watch = RestartWatch(URL, transport=scripted([200, httpx.ConnectError, 500, httpx.ReadTimeout, 200, 200]))
    for t_s in range(6):
        watch.poll_health(float(t_s))
    events = watch.take_events()
    assert [(e["t_s"], e["reason"], e["latency_s"]) for e in events] == [(1.0, "health", 3.0)]
    assert (watch.num_outages, watch.num_slow) == (1, 1)
    assert "1 outages, 1 slow answers" in watch.status().detail


def test_an_outage_still_on_at_the_end_is_recorded_without_a_return() -> None:
    watch = RestartWatch(URL, transport=scripted([200, httpx.ConnectError]))
    watch.poll_health(0.0)
    watch.poll_health(1.0)
    watch.finish(5.0)
    assert [(e["t_s"], e["latency_s"]) for e in watch.take_events()] == [(1.0, None)]


def test_a_server_without_health_or_a_start_time_is_not_a_witness() -> None:
    watch = RestartWatch(URL, transport=scripted([404, httpx.ConnectError, 404]))
    for t_s in range(3):
        watch.poll_health(float(t_s))
    watch.observe(Scrape("llamacpp", {"num_running": 1.0}, {}), 3.0)
    assert watch.take_events() == []  # failures before any healthy answer are no outage
    status = watch.status()
    assert not status.available and "HTTP 404" in status.detail


def test_a_recorded_vllm_scrape_gives_the_start_time_the_pool_and_the_preemption_counter() -> None:
    text = (Path(__file__).resolve().parents[3] / "fixtures" / "engines" / "vllm_metrics.txt").read_text()
    scrape = parse_metrics(text)
    assert scrape.gauges["process_start_s"] == 1.79618567849e09 and scrape.counters["num_preemptions"] == 0
    assert scraped_pool(scrape) == PoolCapacity(160, 128, "vllm:cache_config_info")
    watch = RestartWatch(URL, transport=scripted([]))
    watch.observe(scrape, 1.0)
    assert watch.take_events() == [] and "process_start_time_seconds" in watch.status().detail
