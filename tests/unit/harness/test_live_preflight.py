"""Preflight says plainly what is wrong: the key, the address, the base URL or model, the body."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from harness.preflight import PreflightError, mask, preflight

BASE = "http://127.0.0.1:8000"
OK_BODY = {"id": "c-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}}]}
MODELS = {"object": "list", "data": [{"id": "llama-3.1-8b", "object": "model"}]}


def server(chat: Callable[[httpx.Request], httpx.Response], models_status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(models_status, json=MODELS if models_status == 200 else {"detail": "Not Found"})
        if request.url.path == "/v1/chat/completions":
            return chat(request)
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.MockTransport(handle)


def error(status: int, code: str, message: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda r: httpx.Response(status, json={"error": {"message": message, "type": "x", "code": code}})


def test_a_healthy_target_passes_and_names_the_model_it_serves() -> None:
    sent: list[dict] = []

    def chat(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=OK_BODY)

    result = preflight(BASE, key="sk-acme", transport=server(chat))
    assert result.model == "llama-3.1-8b" and result.served_models == ("llama-3.1-8b",)
    assert sent[0]["max_tokens"] == 1 and not sent[0].get("stream")


def test_401_points_at_the_key_and_masks_it() -> None:
    with pytest.raises(PreflightError, match="refused the API key sk-wr…ey .*HTTP 401") as err:
        preflight(BASE, key="sk-wrong-key", transport=server(error(401, "invalid_api_key", "unknown API key")))
    assert "sk-wrong-key" not in str(err.value) and "--tenants" in str(err.value)


def test_404_for_an_unknown_model_lists_the_served_models() -> None:
    chat = error(404, "model_not_found", "model 'gpt-4' is not served here")
    with pytest.raises(
        PreflightError, match="model 'gpt-4' is not served here; the server lists these models: llama-3.1-8b"
    ):
        preflight(BASE, key="sk-acme", model="gpt-4", transport=server(chat))


def test_404_under_a_wrong_base_url_points_at_the_base_url() -> None:
    with pytest.raises(PreflightError, match=r"it ends in /v1: give the server root") as err:
        preflight(
            BASE + "/v1",
            key="sk-acme",
            model="m",
            transport=server(error(404, "not_found", "no route"), models_status=404),
        )
    assert "check the base URL" in str(err.value)


def test_a_refused_connection_points_at_the_address() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(PreflightError, match="cannot connect to http://127.0.0.1:8000 .*check the address"):
        preflight(BASE, key="sk-acme", model="m", transport=httpx.MockTransport(refuse))


def test_a_really_closed_port_is_refused() -> None:
    with pytest.raises(PreflightError, match="cannot connect"):
        preflight("http://127.0.0.1:9", key="sk-acme", model="m", timeout_s=5)


def test_a_body_without_choices_is_printed() -> None:
    chat = lambda r: httpx.Response(200, json={"object": "proxy", "status": "upstream unavailable"})  # noqa: E731
    with pytest.raises(PreflightError, match=r"(?s)no `choices`.*\"status\": ?\"upstream unavailable\""):
        preflight(BASE, key="sk-acme", model="m", transport=server(chat))


def test_any_other_status_shows_status_and_body() -> None:
    with pytest.raises(PreflightError, match="(?s)HTTP 503 .*worker_lost"):
        preflight(BASE, key="sk-acme", model="m", transport=server(error(503, "worker_lost", "gone")))


def test_keys_are_masked() -> None:
    assert mask("sk-kvgate-admin") == "sk-kv…in" and mask("short") == "…"


def test_a_refusal_for_capacity_passes_the_setup_is_right_and_the_gates_judge_it() -> None:
    result = preflight(BASE, key="sk-acme", transport=server(error(429, "tenant_quota", "over its cap")))
    assert result.model == "llama-3.1-8b"
    with pytest.raises(PreflightError, match="HTTP 429"):  # a 429 that is not an OpenAI error explains nothing
        preflight(BASE, key="sk-acme", transport=server(lambda r: httpx.Response(429, text="slow down")))
