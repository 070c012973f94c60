"""llama.cpp from outside: its /metrics names and its /slots occupancy, with the key sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.collectors.llamacpp_slots import KvLayout, SlotsReader, SlotsUnavailable, slots_gauges
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


HELD = 1024 + 1500  # the processing slots' n_prompt_tokens: their prompts and what they generated so far
CACHE = 4 * 4096  # the recorded server's cache, split four ways


def unified(slots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same server state under a unified cache: every slot's n_ctx is the whole cache."""
    return [{**slot, "n_ctx": CACHE} for slot in slots]


def test_slots_usage_counts_only_what_processing_slots_hold_over_the_split_cache() -> None:
    gauges = slots_gauges(json.loads(SLOTS), KvLayout.SPLIT)
    assert gauges["num_running"] == 2
    assert gauges["usage"] == pytest.approx(HELD / CACHE)  # an idle slot's cache is not in use; n_decoded not again


def test_a_unified_cache_is_one_slot_s_n_ctx_not_the_sum_of_them() -> None:
    slots = unified(json.loads(SLOTS))
    assert slots_gauges(slots, KvLayout.UNIFIED)["usage"] == pytest.approx(
        HELD / CACHE
    )  # the same state, the same usage
    assert slots_gauges(slots, KvLayout.SPLIT)["usage"] == pytest.approx(HELD / CACHE / 4)  # summed: 4 times too low


def test_a_split_server_read_as_unified_is_refused_once_its_slots_hold_more_than_one_slot_s_n_ctx() -> None:
    slots = json.loads(SLOTS)
    slots[1]["n_prompt_tokens"] = 3500  # 1,024 + 3,500 > 4,096: no unified cache of 4,096 holds that
    with pytest.raises(SlotsUnavailable, match="--llamacpp-kv split"):
        slots_gauges(slots, KvLayout.UNIFIED)
    assert slots_gauges(slots, KvLayout.SPLIT)["usage"] == pytest.approx(4524 / CACHE)


def test_a_processing_slot_that_does_not_say_what_it_holds_makes_usage_unavailable() -> None:
    slots = json.loads(SLOTS)
    del slots[0]["n_prompt_tokens"]
    with pytest.raises(SlotsUnavailable, match="n_prompt_tokens"):
        slots_gauges(slots, KvLayout.SPLIT)


@pytest.mark.parametrize("answer", [[], {"error": "x"}, [{"id": 0}]])
def test_anything_but_a_list_of_slots_is_unavailable(answer: object) -> None:
    with pytest.raises(SlotsUnavailable):
        slots_gauges(answer, KvLayout.SPLIT)


def test_the_key_is_sent_to_metrics_and_slots_and_a_llamacpp_scrape_is_completed_from_slots() -> None:
    seen: list[tuple[str, str, dict[str, str]]] = []
    with stub_server(llama_server, seen) as url:
        scraper = PrometheusScraper(f"{url}/metrics", api_key=KEY)
        telemetry = TargetTelemetry(url, scraper, api_key=KEY, llamacpp_kv=KvLayout.SPLIT)
        scrape = telemetry.complete(scraper.scrape())
        telemetry.close()
        scraper.close()
    assert scrape.gauges["usage"] == pytest.approx(HELD / CACHE) and scrape.gauges["num_waiting"] == 3
    status = telemetry.statuses()["llamacpp_slots"]
    assert status.available and "split KV cache" in status.detail
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
