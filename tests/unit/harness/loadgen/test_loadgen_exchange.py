"""The exchange over a scripted transport: every way a request can end becomes one outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

from harness.loadgen.exchange import Call, Cancel, TransportError, run_exchange
from harness.loadgen.outcome import ClientCode, RequestOutcome
from harness.loadgen.prompts import chat_prompt
from harness.loadgen.tenants import Tenant

TENANT = Tenant("acme", "sk-acme", "interactive")


def sse(delta: dict | None = None, finish: str | None = None, **extra) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps({"id": "chatcmpl-1", "choices": choices, **extra}).encode() + b"\n"


def ok_stream(*words: str) -> list[bytes]:
    lines = [sse({"role": "assistant", "content": ""})]
    lines += [sse({"content": (" " if i else "") + w}) for i, w in enumerate(words)]
    lines += [
        sse({}, "stop", kvgate={"max_tokens_clamped": False, "worker": None}),
        sse(usage={"prompt_tokens": 64, "completion_tokens": len(words)}),
        b"data: [DONE]\n",
    ]
    return lines


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedResponse:
    """Lines arrive one per `step_s` of the fake clock; deadlines are checked as time passes."""

    def __init__(
        self, transport: ScriptedTransport, status: int, headers: Mapping[str, str], lines: list[bytes], body: bytes
    ) -> None:
        self.transport, self.status, self.headers = transport, status, headers
        self._lines, self._body = list(lines), body
        self.closed = False

    def readline(self) -> bytes:
        self.transport.advance()
        return self._lines.pop(0) if self._lines else b""

    def read_all(self) -> bytes:
        return self._body

    def close(self) -> None:
        self.closed = True


class ScriptedTransport:
    def __init__(
        self,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        lines: list[bytes] | None = None,
        body: bytes = b"",
        headers_after_s: float = 0.010,
        step_s: float = 0.005,
        raise_on_open: BaseException | None = None,
        raise_on_line: tuple[int, BaseException] | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.status, self.headers = status, {"x-request-id": "chatcmpl-1", **(headers or {})}
        self.lines, self.body = lines if lines is not None else ok_stream("kaloan", "mipe"), body
        self.headers_after_s, self.step_s = headers_after_s, step_s
        self.raise_on_open, self.raise_on_line = raise_on_open, raise_on_line
        self.deadlines: list[tuple[float, BaseException]] = []
        self.response: ScriptedResponse | None = None
        self.sent: tuple[str, bytes, Mapping[str, str]] | None = None
        self.num_lines = 0

    def advance(self, by_s: float | None = None) -> None:
        self.clock.now += self.step_s if by_s is None else by_s
        for at, error in self.deadlines:
            if self.clock.now >= at:
                raise error
        if self.raise_on_line and self.num_lines == self.raise_on_line[0]:
            raise self.raise_on_line[1]
        self.num_lines += 1

    def open(self, path: str, body: bytes, headers: Mapping[str, str]) -> ScriptedResponse:
        self.sent = (path, body, headers)
        if self.raise_on_open is not None:
            raise self.raise_on_open
        self.advance(self.headers_after_s)
        self.num_lines = 0
        self.response = ScriptedResponse(self, self.status, self.headers, self.lines, self.body)
        return self.response

    @contextmanager
    def deadline(self, seconds: float, error: BaseException) -> Iterator[None]:
        entry = (self.clock.now + seconds, error)
        self.deadlines.append(entry)
        try:
            yield
        finally:
            self.deadlines.remove(entry)


def exchange(transport: ScriptedTransport, **call_fields) -> tuple[RequestOutcome, str, list[RequestOutcome]]:
    fields = {
        "request_id": "r-1",
        "scenario": "short_qa",
        "phase": "load",
        "tenant": TENANT,
        "model": "m",
        "prompt": chat_prompt(64, seed=1),
        "max_tokens": 32,
        **call_fields,
    }
    done: list[RequestOutcome] = []
    result = run_exchange(
        transport, Call(**fields), timeout_s=60, on_done=done.append, clock=transport.clock, wall=lambda: 1000.0
    )
    assert done == [result.outcome]
    return result.outcome, result.text, done


def test_a_streamed_answer_is_ok_with_ttft_at_the_first_content_delta() -> None:
    t = ScriptedTransport(headers_after_s=0.020, step_s=0.005)
    o, text, _ = exchange(t)
    assert (o.status, o.http_status, o.engine_request_id, o.finish_reason) == ("ok", 200, "chatcmpl-1", "stop")
    assert o.ttft_s == pytest.approx(0.030)  # headers at 20 ms, role chunk at 25, first content at 30
    assert o.e2e_s == pytest.approx(0.020 + 6 * 0.005)
    assert (o.prompt_tokens, o.completion_tokens, o.max_tokens, o.sent_unix) == (64, 2, 32, 1000.0)
    assert text == "kaloan mipe" and t.response is not None and t.response.closed


def test_the_request_is_a_streaming_chat_completion_with_the_tenants_key_and_session() -> None:
    t = ScriptedTransport()
    exchange(t, session_id="s-1", rebuildable=False)
    assert t.sent is not None
    path, body, headers = t.sent
    payload = json.loads(body)
    assert path == "/v1/chat/completions" and payload["stream"] and payload["stream_options"]["include_usage"]
    assert (payload["model"], payload["max_tokens"]) == ("m", 32)
    assert headers["Authorization"] == "Bearer sk-acme"
    assert (headers["X-Session-Id"], headers["X-Session-Rebuildable"]) == ("s-1", "false")


@pytest.mark.parametrize(
    ("status", "code"),
    [(429, "tenant_quota"), (429, "kv_capacity"), (410, "context_expired"), (400, "context_length_exceeded")],
)
def test_an_http_error_is_recorded_with_its_openai_error_code(status: int, code: str) -> None:
    body = json.dumps({"error": {"message": "no", "type": "x", "param": None, "code": code}}).encode()
    o, _, _ = exchange(ScriptedTransport(status=status, body=body, lines=[]))
    assert (o.status, o.http_status, o.error_code, o.ttft_s) == ("error", status, code, None)
    assert o.is_rejection is (status == 429) and o.is_failure is (status != 429)


def test_an_error_without_an_openai_body_gets_an_http_code() -> None:
    o, _, _ = exchange(ScriptedTransport(status=502, body=b"<html>bad gateway</html>", lines=[]))
    assert (o.status, o.error_code) == ("error", "http_502")


def test_kvgate_headers_are_recorded() -> None:
    headers = {
        "x-kvgate-session-rebuilt": "true",
        "x-kvgate-max-tokens-clamped": "16",
        "x-kvgate-worker": "1",
        "x-kvgate-approximate": "true",
    }
    o, _, _ = exchange(ScriptedTransport(headers=headers))
    assert (o.session_rebuilt, o.max_tokens_clamped, o.approximate, o.worker) == (True, True, True, "1")


def test_a_cancel_after_words_hangs_up_mid_decode_and_is_not_a_failure() -> None:
    t = ScriptedTransport(lines=ok_stream("a", "b", "c", "d", "e"))
    o, _, _ = exchange(t, cancel=Cancel(after_words=2))
    assert (o.status, o.cancel_intended, o.completion_tokens, o.http_status) == ("cancelled", True, 2, 200)
    assert not o.is_failure and o.ttft_s is not None and t.response is not None and t.response.closed


def test_a_timed_cancel_before_the_headers_is_a_mid_prefill_cancel() -> None:
    o, _, _ = exchange(ScriptedTransport(headers_after_s=0.5), cancel=Cancel(after_s=0.03))
    assert (o.status, o.http_status, o.ttft_s, o.error_code) == ("cancelled", None, None, "")


def test_the_request_timeout_is_a_timeout() -> None:
    t = ScriptedTransport(headers_after_s=120)
    o, _, _ = exchange(t)
    assert (o.status, o.error_code) == ("timeout", "timeout")


@pytest.mark.parametrize(
    ("code", "status"),
    [(ClientCode.CONNECTION_ERROR, "error"), (ClientCode.TIMEOUT, "timeout"), (ClientCode.BAD_RESPONSE, "error")],
)
def test_transport_failures_become_client_codes(code: ClientCode, status: str) -> None:
    o, _, _ = exchange(ScriptedTransport(raise_on_open=TransportError(code, "boom")))
    assert (o.status, o.error_code, o.http_status) == (status, code.value, None)


def test_a_stream_cut_off_before_done_is_a_connection_error() -> None:
    o, _, _ = exchange(ScriptedTransport(lines=ok_stream("a", "b")[:3]))
    assert (o.status, o.error_code) == ("error", "connection_error")


def test_an_sse_error_event_after_the_first_token_is_an_error_with_its_code() -> None:
    lines = ok_stream("a")[:2] + [
        b'data: {"error": {"message": "worker died", "code": "worker_lost"}}\n',
        b"data: [DONE]\n",
    ]
    o, _, _ = exchange(ScriptedTransport(lines=lines))
    assert (o.status, o.http_status, o.error_code) == ("error", 200, "worker_lost")
    assert o.ttft_s is not None


def test_a_server_that_ignores_stream_true_is_read_as_one_body() -> None:
    body = json.dumps({"id": "x", "choices": [{"message": {"content": "hi there"}, "finish_reason": "stop"}]}).encode()
    o, text, _ = exchange(ScriptedTransport(headers={"content-type": "application/json"}, body=body, lines=[]))
    assert (o.status, o.streaming, text, o.ttft_s) == ("ok", False, "hi there", o.e2e_s)


class Interrupt(BaseException):
    """Stands in for gevent's GreenletExit: locust killing a user at the end of a run."""


@pytest.mark.parametrize("cancel", [None, Cancel(after_words=50)])
def test_a_request_open_when_the_run_stops_is_unfinished_never_an_intended_cancel(cancel: Cancel | None) -> None:
    t = ScriptedTransport(raise_on_line=(2, Interrupt()))
    done: list[RequestOutcome] = []
    call = Call(
        request_id="r",
        scenario="s",
        phase="load",
        tenant=TENANT,
        model="m",
        prompt=chat_prompt(64, seed=1),
        max_tokens=8,
        cancel=cancel,
    )
    with pytest.raises(Interrupt):
        run_exchange(t, call, timeout_s=60, on_done=done.append, clock=t.clock)
    assert [(o.status, o.error_code, o.cancel_intended) for o in done] == [("unfinished", "run_stopped", False)]
    assert not done[0].is_failure  # the harness cut it: locust counts it apart, the gates as not served
    assert t.response is not None and t.response.closed


def test_a_malformed_chunk_is_a_bad_response_even_when_done_follows() -> None:
    lines = [b'data: {"id": "x", "choices": [{"delta": {"content": "he\n', *ok_stream("kaloan")]
    o, _, _ = exchange(ScriptedTransport(lines=lines))
    assert (o.status, o.error_code) == ("error", "bad_response")


@pytest.mark.parametrize(
    "lines", [[b"data: [DONE]\n"], [sse({"role": "assistant", "content": ""}), sse({}, "stop"), b"data: [DONE]\n"]]
)
def test_a_stream_without_output_is_an_empty_answer_not_ok(lines: list[bytes]) -> None:
    o, text, _ = exchange(ScriptedTransport(lines=lines))
    assert (o.status, o.error_code, o.ttft_s, text) == ("error", "empty_answer", None, "")
    assert o.is_failure


def test_a_body_without_output_is_an_empty_answer() -> None:
    body = json.dumps({"id": "x", "choices": [{"message": {"content": ""}, "finish_reason": "stop"}]}).encode()
    o, _, _ = exchange(ScriptedTransport(headers={"content-type": "application/json"}, body=body, lines=[]))
    assert (o.status, o.error_code) == ("error", "empty_answer")


@pytest.mark.parametrize(
    "first",
    [
        {"reasoning_content": "hmm"},
        {"reasoning": "hmm"},
        {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]},
    ],
)
def test_ttft_is_taken_at_the_first_reasoning_or_tool_call_delta(first: dict) -> None:
    lines = [sse({"role": "assistant", "content": ""}), sse(first), *ok_stream("kaloan")[1:]]
    t = ScriptedTransport(lines=lines, headers_after_s=0.010, step_s=0.005)
    o, text, _ = exchange(t)
    assert (o.status, text) == ("ok", "kaloan")
    assert o.ttft_s == pytest.approx(0.010 + 2 * 0.005)  # the second line, not the first content (third)


@pytest.mark.parametrize(
    ("status", "code", "is_rejection"),
    [
        (429, "tenant_quota", True),
        (503, "overloaded", True),
        (529, "overloaded_error", True),
        (503, "out_of_memory", False),
        (503, "worker_lost", False),
        (500, "internal_error", False),
    ],
)
def test_overload_statuses_are_explicit_refusals_and_keep_their_retry_after(
    status: int, code: str, is_rejection: bool
) -> None:
    body = json.dumps({"error": {"message": "busy", "code": code}}).encode()
    o, _, _ = exchange(ScriptedTransport(status=status, headers={"retry-after": "2"}, body=body, lines=[]))
    assert (o.error_code, o.retry_after_s, o.is_rejection, o.is_failure) == (code, 2.0, is_rejection, not is_rejection)


def test_a_bug_propagates_without_a_row() -> None:
    t = ScriptedTransport(raise_on_open=KeyError("bug"))
    done: list[RequestOutcome] = []
    call = Call(
        request_id="r",
        scenario="s",
        phase="load",
        tenant=TENANT,
        model="m",
        prompt=chat_prompt(64, seed=1),
        max_tokens=8,
    )
    with pytest.raises(KeyError):
        run_exchange(t, call, timeout_s=60, on_done=done.append, clock=t.clock)
    assert done == []


def test_a_refusal_keeps_the_servers_retry_after_for_the_client_to_wait_out() -> None:
    body = json.dumps({"error": {"message": "later", "type": "x", "param": None, "code": "kv_capacity"}}).encode()
    o, _, _ = exchange(ScriptedTransport(status=429, headers={"retry-after": "2"}, body=body, lines=[]))
    assert o.retry_after_s == 2.0 and o.is_rejection and "retry_after_s" not in o.row(0.0)
    o, _, _ = exchange(
        ScriptedTransport(status=429, headers={"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, body=body, lines=[])
    )
    assert o.retry_after_s is None
