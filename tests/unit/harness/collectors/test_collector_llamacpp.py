"""llama.cpp from outside: its /metrics names and its /slots occupancy, with the key sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.collectors.llamacpp_slots import SlotsReader, SlotsUnavailable, slots_gauges
from harness.collectors.prometheus import PrometheusScraper, parse_metrics
from harness.collectors.target_telemetry import TargetTelemetry
from tests.stub_http import stub_server

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "engines"
METRICS = (FIXTURES / "llamacpp_metrics.txt").read_text()
SLOTS = (FIXTURES / "llamacpp_slots.json").read_text()
KEY = "sk-llama-secret"


def llama_server(method: str, path: str) -> tuple[int, bytes]:
    return {"/metrics": (200, METRICS.encode()), "/slots": (200, SLOTS.encode())}.get(path, (404, b"{}"))


def test_llamacpp_metrics_give_its_queue_and_prompt_cache_counters() -> None:
    scrape = parse_metrics(METRICS)
    assert scrape.dialect == "llamacpp"
    assert scrape.gauges == {"num_running": 2.0, "num_waiting": 3.0}  # no usage metric in current builds
    assert scrape.counters["prefix_cache_hits_tokens"] == 2114 and scrape.counters["prompt_tokens_computed"] == 6886


def test_slots_usage_counts_only_the_tokens_of_processing_slots() -> None:
    gauges = slots_gauges(json.loads(SLOTS))
    assert gauges["num_running"] == 2
    assert gauges["usage"] == pytest.approx((1000 + 24 + 1500) / (4 * 4096))  # idle slot's cache is not in use


@pytest.mark.parametrize("answer", [[], {"error": "x"}, [{"id": 0}]])
def test_anything_but_a_list_of_slots_is_unavailable(answer: object) -> None:
    with pytest.raises(SlotsUnavailable):
        slots_gauges(answer)


def test_the_key_is_sent_to_metrics_and_slots_and_a_llamacpp_scrape_is_completed_from_slots() -> None:
    seen: list[tuple[str, str, dict[str, str]]] = []
    with stub_server(llama_server, seen) as url:
        scraper = PrometheusScraper(f"{url}/metrics", api_key=KEY)
        telemetry = TargetTelemetry(url, scraper, api_key=KEY)
        scrape = telemetry.complete(scraper.scrape())
        telemetry.close()
        scraper.close()
    assert scrape.gauges["usage"] == pytest.approx(2524 / 16384) and scrape.gauges["num_waiting"] == 3
    assert telemetry.statuses()["llamacpp_slots"].available
    assert {(m, p) for m, p, _ in seen} == {("GET", "/metrics"), ("GET", "/slots")}
    assert all(h.get("Authorization") == f"Bearer {KEY}" for _, _, h in seen)


def test_slots_refused_is_said_in_the_status_and_the_scrape_stays_as_it_was() -> None:
    def refused(method: str, path: str) -> tuple[int, bytes]:
        return (200, METRICS.encode()) if path == "/metrics" else (401, b'{"error":"Invalid API Key"}')

    with stub_server(refused) as url:
        reader = SlotsReader(url, api_key="wrong")
        with pytest.raises(SlotsUnavailable, match="HTTP 401"):
            reader.read()
        reader.close()
        scraper = PrometheusScraper(f"{url}/metrics")
        telemetry = TargetTelemetry(url, scraper)
        scrape = telemetry.complete(scraper.scrape())
        telemetry.close()
    assert "usage" not in scrape.gauges
    status = telemetry.statuses()["llamacpp_slots"]
    assert not status.available and "401" in status.detail
