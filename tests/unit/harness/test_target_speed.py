"""Timing the target: a fake server that streams at a known modelled speed, on a fake clock."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from harness.loadgen.outcome import RequestOutcome, Status
from harness.loadgen.prompts import REFERENCE_TOKENS
from harness.target_speed import (
    OUTPUT_TOKENS,
    PARALLEL_PROBES,
    SpeedNotMeasuredError,
    TargetTooSlowError,
    fit_parallelism,
    measure_speed,
)

BASE = "http://127.0.0.1:8000"


class FakeClock:
    """Seconds that pass only when the fake server says its work took them."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class ModelledServer:
    """A server that serves one request at a time: `first_token_s` + a prompt's words ×
    `prefill_s` to the first token, then `decode_s` a token, up to max_tokens (or `answer_tokens`)."""

    def __init__(
        self,
        clock: FakeClock,
        *,
        first_token_s: float = 0.1,
        prefill_s: float = 0.001,
        decode_s: float = 0.05,
        max_model_len: int | None = 4096,
        answer_tokens: int | None = None,
        chat_status: int = 200,
    ) -> None:
        self.clock, self.first_token_s, self.prefill_s, self.decode_s = clock, first_token_s, prefill_s, decode_s
        self.max_model_len, self.answer_tokens, self.chat_status = max_model_len, answer_tokens, chat_status
        self.prompts: list[int] = []

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            entry = {"id": "m", "object": "model"}
            if self.max_model_len:
                entry["max_model_len"] = self.max_model_len
            return httpx.Response(200, json={"object": "list", "data": [entry]})
        if self.chat_status != 200:
            return httpx.Response(self.chat_status, json={"error": {"message": "down", "code": "boom"}})
        body = json.loads(request.content)
        num_prompt = sum(len(m["content"].split()) for m in body["messages"])
        num_answer = self.answer_tokens or body["max_tokens"]
        self.prompts.append(num_prompt)
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Stream(self._events(num_prompt, num_answer)))

    def _events(self, num_prompt: int, num_answer: int) -> Iterator[bytes]:
        self.clock.advance(self.first_token_s + num_prompt * self.prefill_s)
        for i in range(num_answer):
            if i:
                self.clock.advance(self.decode_s)
            yield _sse({"id": "c", "choices": [{"index": 0, "delta": {"content": f" w{i}"}}]})
        usage = {"prompt_tokens": num_prompt, "completion_tokens": num_answer}
        yield _sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage})
        yield b"data: [DONE]\n\n"


class _Stream(httpx.SyncByteStream):
    def __init__(self, events: Iterator[bytes]) -> None:
        self._events = events

    def __iter__(self) -> Iterator[bytes]:
        yield from self._events


def _sse(chunk: dict) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()


def measure(server: ModelledServer, clock: FakeClock):
    return measure_speed(BASE, key="sk", model="m", tokens=REFERENCE_TOKENS, clock=clock, transport=server.transport())


def test_the_probes_recover_the_modelled_prefill_decode_and_first_token() -> None:
    clock = FakeClock()
    server = ModelledServer(clock, first_token_s=0.1, prefill_s=0.001, decode_s=0.05, max_model_len=4096)
    speed = measure(server, clock)
    assert speed.prefill_tokens_per_s == pytest.approx(1000)
    assert speed.decode_tokens_per_s == pytest.approx(20)
    assert speed.first_token_s == pytest.approx(0.1)
    assert speed.max_model_len == 4096
    assert speed.parallelism == 1.0  # it served the burst in turn
    assert len(server.prompts) == 2 + PARALLEL_PROBES and server.prompts[1] > 10 * server.prompts[0]
    assert [p["completion_tokens"] for p in speed.probes] == [OUTPUT_TOKENS] * 2
    figures = speed.to_dict()
    assert figures["prefill_tokens_per_s"] == pytest.approx(1000) and "streamed" in figures["method"]


def test_the_long_probe_is_at_most_half_the_context_the_server_reports() -> None:
    clock = FakeClock()
    server = ModelledServer(clock, max_model_len=400)
    speed = measure(server, clock)
    assert server.prompts[1] <= 200 and speed.max_model_len == 400


def test_a_server_that_reports_no_context_length_gives_none() -> None:
    clock = FakeClock()
    assert measure(ModelledServer(clock, max_model_len=None), clock).max_model_len is None


def test_one_token_answers_leave_decode_unmeasured_and_charged_as_an_upper_bound() -> None:
    clock = FakeClock()
    speed = measure(ModelledServer(clock, answer_tokens=1), clock)
    assert any("answers of one token" in n for n in speed.notes)
    assert speed.decode_s_per_token == pytest.approx(speed.probes[0]["ttft_s"])


def test_a_probe_the_target_does_not_serve_leaves_the_speed_unmeasured_for_the_gates_to_judge() -> None:
    clock = FakeClock()
    with pytest.raises(SpeedNotMeasuredError, match=r"not served: error boom \(HTTP 500\)"):
        measure(ModelledServer(clock, chat_status=500), clock)


def hanging(server: ModelledServer, *, when: str) -> httpx.MockTransport:
    """`server`, except that chat requests whose id contains `when` never answer (a read timeout)."""

    def handle(request: httpx.Request) -> httpx.Response:
        if when in request.headers.get("x-request-id", ""):
            raise httpx.ReadTimeout("no answer", request=request)
        return server.handle(request)

    return httpx.MockTransport(handle)


def test_a_probe_that_times_out_alone_is_a_harness_error() -> None:
    clock = FakeClock()
    transport = hanging(ModelledServer(clock), when="speed-long")
    with pytest.raises(TargetTooSlowError, match="did not answer a .*-token prompt alone"):
        measure_speed(BASE, key="sk", model="m", tokens=REFERENCE_TOKENS, clock=clock, transport=transport)


def test_a_target_that_hangs_under_load_is_measured_as_serving_one_at_a_time() -> None:
    clock = FakeClock()
    transport = hanging(ModelledServer(clock), when="burst-3")
    speed = measure_speed(BASE, key="sk", model="m", tokens=REFERENCE_TOKENS, clock=clock, transport=transport)
    assert speed.parallelism == 1.0 and speed.decode_tokens_per_s == pytest.approx(20)


def outcome(status: Status = Status.OK) -> RequestOutcome:
    return RequestOutcome(request_id="r", scenario="s", phase="p", tenant="t", traffic_class="i", sent_unix=0.0,
                          status=status.value)  # fmt: skip


def test_parallelism_is_how_many_at_once_the_target_served_as_fast_as_one() -> None:
    burst = [outcome() for _ in range(8)]
    assert fit_parallelism(1.0, 2.0, burst) == 4.0  # eight in the time of two
    assert fit_parallelism(1.0, 0.5, burst) == 8.0  # never more than were sent
    assert fit_parallelism(1.0, 9.0, burst) == 1.0  # slower than in turn: 1
    assert fit_parallelism(1.0, 2.0, [*burst[:7], outcome(Status.ERROR)]) == 1.0
