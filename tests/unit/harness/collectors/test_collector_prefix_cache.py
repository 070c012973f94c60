"""The prefix-cache reset and the isolation probes against stub servers that answer like vLLM."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from harness.collectors.prefix_cache import probe_cache_salt, probe_cross_tenant, reset_prefix_cache
from tests.stub_http import stub_server

Answer = Callable[[str, str], tuple[int, bytes]]


def salted_engine(*, cached: Callable[[int], int | None]) -> tuple[Answer, list[int]]:
    """A chat endpoint whose n-th answer reports `cached(n)` cached tokens (None: no details)."""
    calls: list[int] = []

    def answer(method: str, path: str) -> tuple[int, bytes]:
        if path != "/v1/chat/completions":
            return 404, b"{}"
        calls.append(len(calls))
        hit = cached(len(calls) - 1)
        usage = {
            "prompt_tokens": 612,
            "completion_tokens": 1,
            "prompt_tokens_details": None if hit is None else {"cached_tokens": hit},
        }
        return 200, json.dumps({"choices": [{"message": {"content": "x"}}], "usage": usage}).encode()

    return answer, calls


def probe(answer: Answer, hit_counter=None):
    with stub_server(answer) as url, httpx.Client() as client:
        return probe_cache_salt(client, url, "m", hit_counter)


def test_a_same_salt_hit_and_an_other_salt_miss_is_isolation() -> None:
    answer, calls = salted_engine(cached=lambda n: {0: 0, 1: 512, 2: 0}[n])
    result = probe(answer)
    assert len(calls) == 3 and result.measurable and result.isolated is True
    assert (result.same_hit_tokens, result.other_hit_tokens, result.source) == (512, 0, "usage")


def test_an_other_salt_hit_is_a_leak() -> None:
    answer, _ = salted_engine(cached=lambda n: 0 if n == 0 else 512)
    result = probe(answer)
    assert result.measurable and result.isolated is False and result.other_hit_tokens == 512


def test_no_hit_with_the_same_salt_cannot_tell_and_is_not_measurable() -> None:
    answer, _ = salted_engine(cached=lambda n: 0)
    result = probe(answer)
    assert not result.measurable and result.isolated is None and "cannot be told" in result.detail


def test_without_cached_token_details_the_counters_decide() -> None:
    answer, _ = salted_engine(cached=lambda n: None)
    counters = iter([(0, 0), (612, 0), (612, 0), (1224, 512), (1224, 512), (1836, 512)])
    result = probe(answer, hit_counter=lambda: next(counters))
    assert result.measurable and result.source == "metrics" and result.isolated is True
    assert result.same_hit_tokens == 512
    silent, _ = salted_engine(cached=lambda n: None)
    assert not probe(silent).measurable  # no details and no counters: nothing to tell by


def test_reset_reads_vllms_success_flag_and_says_when_there_is_no_route() -> None:
    def vllm(body: bytes) -> Answer:
        return lambda method, path: (200, body) if path == "/reset_prefix_cache" else (404, b"{}")

    with httpx.Client() as client:
        with stub_server(vllm(b'{"success":true}')) as url:
            assert reset_prefix_cache(client, url).ok
        with stub_server(vllm(b'{"success":false}')) as url:
            held = reset_prefix_cache(client, url)
            assert held.available and not held.ok  # blocks still held: the leak check fails
        with stub_server(lambda m, p: (404, b"{}")) as url:
            none = reset_prefix_cache(client, url)
            assert not none.available and "VLLM_SERVER_DEV_MODE" in none.detail


def test_the_cross_tenant_probe_sends_as_a_then_a_then_b_and_a_hit_by_b_is_a_leak() -> None:
    shared, _ = salted_engine(cached=lambda n: 0 if n == 0 else 512)  # vLLM: no tenants, one cache
    seen: list[tuple[str, str, dict[str, str]]] = []
    with stub_server(shared, seen) as url, httpx.Client(headers={"Authorization": "Bearer sk-a"}) as a:
        with httpx.Client(headers={"Authorization": "Bearer sk-b"}) as b:
            result = probe_cross_tenant(a, b, url, "m")
    assert [h["Authorization"] for _, _, h in seen] == ["Bearer sk-a", "Bearer sk-a", "Bearer sk-b"]
    assert result.measurable and result.isolated is False and result.other_hit_tokens == 512
    assert result.detail == "another tenant hit 512 cached tokens"
