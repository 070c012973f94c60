"""Every error is OpenAI's JSON error shape with the right status, and says what to fix."""

import asyncio

import pytest

from tests.unit.server.server_support import ACME, ADMIN, MODEL, chat, server_config, serving

pytestmark = pytest.mark.anyio

JSON = {**ACME, "content-type": "application/json"}


def error_of(r) -> dict:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(
    "raw, hint",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "should be an object"),
        (b'{"model": 3, "messages": [{"role": "user", "content": "x"}]}', "model"),
        (b'{"model": "llama-3.1-8b", "messages": []}', "messages"),
        (b'{"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "x"}], "max_tokens": -5}', "max_tokens"),
        (b'{"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}', "max_tokens"),
        (b'{"model": "llama-3.1-8b", "messages": [{"role": "user"}], "n": 3}', "n"),
    ],
)
async def test_malformed_input_is_a_400_that_names_the_problem(raw, hint):
    async with serving(server_config()) as (client, _):
        r = await client.post("/v1/chat/completions", content=raw, headers=JSON)
        err = error_of(r)
        assert r.status_code == 400 and err["code"] == "invalid_request" and hint in err["message"]


@pytest.mark.parametrize("prompt", ["", [], [""], [4096 + 2**32]])
async def test_an_empty_or_out_of_vocabulary_text_prompt_names_prompt(prompt):
    async with serving(server_config()) as (client, _):
        r = await client.post("/v1/completions", json={"model": MODEL, "prompt": prompt}, headers=ACME)
        assert r.status_code == 400 and error_of(r)["param"] == "prompt", r.text


async def test_huge_max_tokens_and_long_prompts_are_context_length_exceeded():
    async with serving(server_config(tenants__acme__max_context_tokens=50)) as (client, _):
        huge = await client.post("/v1/chat/completions", json=chat(max_tokens=10**12), headers=ACME)
        assert huge.status_code == 400 and error_of(huge)["code"] == "context_length_exceeded"
        assert "lower max_tokens" in error_of(huge)["message"]
        long = await client.post("/v1/chat/completions", json=chat(" ".join(["w"] * 60)), headers=ACME)
        assert long.status_code == 400 and error_of(long)["code"] == "context_length_exceeded"
        assert long.headers["x-request-id"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer sk-nope"}, ADMIN, {"Authorization": "Basic x"}])
async def test_unknown_keys_are_401(headers):
    async with serving(server_config()) as (client, _):
        r = await client.post("/v1/chat/completions", json=chat(), headers=headers)
        assert r.status_code == 401 and error_of(r)["code"] == "invalid_api_key"


async def test_unknown_model_route_and_method_are_openai_errors():
    async with serving(server_config()) as (client, _):
        model = await client.post("/v1/chat/completions", json={**chat(), "model": "gpt-9"}, headers=ACME)
        assert model.status_code == 404 and error_of(model)["code"] == "model_not_found"
        assert MODEL in error_of(model)["message"]
        route = await client.get("/v1/nothing-here")
        assert route.status_code == 404 and error_of(route)["code"] == "not_found"
        method = await client.get("/v1/chat/completions")
        assert method.status_code == 405 and error_of(method)["code"] == "method_not_allowed"


async def test_oversized_bodies_are_413_declared_or_streamed():
    async with serving(server_config(server__max_body_bytes=2048)) as (client, _):
        big = chat("w " * 2000)
        declared = await client.post("/v1/chat/completions", json=big, headers=ACME)
        assert declared.status_code == 413 and error_of(declared)["code"] == "request_too_large"

        async def chunks():
            for _ in range(10):
                yield b" " * 1000
            yield b"{}"

        streamed = await client.post("/v1/chat/completions", content=chunks(), headers=JSON)
        assert streamed.status_code == 413 and error_of(streamed)["code"] == "request_too_large"


async def test_tenant_quota_is_429_with_retry_after_and_the_request_id():
    async with serving(server_config(tenants__acme__max_kv_share=0.001)) as (client, _):
        r = await client.post("/v1/chat/completions", json=chat(max_tokens=100), headers=ACME)
        assert r.status_code == 429 and error_of(r)["code"] == "tenant_quota"
        assert int(r.headers["retry-after"]) >= 1 and r.headers["x-request-id"]


async def test_a_request_past_its_queue_deadline_is_429_queue_deadline():
    # the hog takes the only sequence slot and the next request waits behind it past its deadline
    config = server_config(engine__max_num_seqs=1, admission__queue_deadline_ms=50)
    async with serving(config) as (client, app):
        running = app.state.kvgate.core.scheduler.running
        hog: asyncio.Task | None = None
        while not running:  # on a busy machine a hog started late is past the deadline too: send another
            if hog is None or hog.done():
                hog = asyncio.create_task(client.post("/v1/chat/completions", json=chat(max_tokens=2000), headers=ACME))
            await asyncio.sleep(0.005)
        assert hog is not None
        r = await client.post("/v1/chat/completions", json=chat(), headers={"Authorization": "Bearer sk-globex"})
        hog.cancel()
        assert r.status_code == 429 and error_of(r)["code"] == "queue_deadline" and r.headers["retry-after"]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_oom_before_the_first_token_is_503_out_of_memory(stream):
    async with serving(server_config(64, kv_cache__policy="none")) as (client, app):
        too_long = {"model": MODEL, "prompt": list(range(2_000)), "max_tokens": 4, "stream": stream}
        r = await client.post("/v1/completions", json=too_long, headers=ACME)
        assert r.status_code == 503 and error_of(r)["code"] == "out_of_memory"
        assert app.state.kvgate.core.scheduler.num_oom == 1
        ok = await client.post("/v1/completions", json={"model": MODEL, "prompt": "a", "max_tokens": 2}, headers=ACME)
        assert ok.status_code == 200


async def test_an_unexpected_exception_is_a_500_in_openai_shape_without_a_traceback():
    async with serving(server_config()) as (client, app):

        async def broken() -> None:
            raise RuntimeError("secret internals")

        app.add_api_route("/broken", broken)
        r = await client.get("/broken")
        assert r.status_code == 500 and error_of(r)["code"] == "internal_error"
        assert "secret" not in r.text and "Traceback" not in r.text
