"""One completion request, start to end, over any transport: the measurement core.

    result = run_exchange(transport, call, timeout_s=120, on_done=record)

`run_exchange` sends `call` (a streaming chat completion), reads the SSE stream line by line,
takes TTFT at the first output delta (content, reasoning or a tool call), hangs up when the
call's `Cancel` says so (after a time: mid-prefill when it is shorter than the prefill; after
some content words: mid-decode), and turns whatever happened into one `RequestOutcome`.
`on_done(outcome)` is called exactly once per call, also when the exchange is interrupted from
outside (locust killing a user at the end of a run: the outcome says `unfinished` /
`run_stopped`, and the interrupt propagates); only a bug (an unexpected ordinary exception)
propagates without a row. The same code measures the locust users (gevent transport) and the
harness's unloaded baseline probe (httpx transport), so loaded and unloaded TTFT mean the same thing.

A `Transport` has two methods: `open` (send the request, return once the status line and
headers arrived) and `deadline` (raise an error wherever the exchange blocks once some seconds
have passed). Transport failures are `TransportError`s carrying a client error code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Protocol

from harness.loadgen.outcome import ClientCode, RequestOutcome, Status, error_of_body
from harness.loadgen.prompts import Prompt
from harness.loadgen.sse import StreamState
from harness.loadgen.tenants import Tenant

CHAT_PATH = "/v1/chat/completions"
REUSE_IDLE_S = 2.0
"""The longest a transport keeps an idle connection for reuse: well under servers' idle timeouts
(uvicorn, which vLLM and kvgate serve run on, closes after 5 s). A request written into a
connection the server is closing gets no answer at all, and a POST is never sent again."""


class TransportError(Exception):
    """The connection failed or the answer was not HTTP; `code` says which (a ClientCode)."""

    def __init__(self, code: ClientCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class RawResponse(Protocol):
    status: int
    headers: Mapping[str, str]  # lower-case names

    def readline(self) -> bytes: ...  # one line with its newline; b"" at the end of the body

    def read_all(self) -> bytes: ...

    def close(self) -> None: ...  # hangs up if the body was not read to its end


class Transport(Protocol):
    def open(self, path: str, body: bytes, headers: Mapping[str, str]) -> RawResponse: ...

    def deadline(self, seconds: float, error: BaseException) -> AbstractContextManager[None]: ...


@dataclass(frozen=True, kw_only=True)
class Cancel:
    """When the client hangs up on purpose: after `after_s` seconds, or after `after_words`
    content words, whichever comes first."""

    after_s: float | None = None
    after_words: int | None = None


@dataclass(frozen=True, kw_only=True)
class Call:
    """A streaming chat completion to send, and who sends it."""

    request_id: str
    scenario: str
    phase: str
    tenant: Tenant
    model: str
    prompt: Prompt
    max_tokens: int | None
    session_id: str = ""
    rebuildable: bool = True
    cancel: Cancel | None = None
    cache_salt: str | None = None
    """vLLM's `cache_salt`: the prefix cache shares blocks only with the same salt (isolation probes)."""

    def body(self) -> bytes:
        body: dict = {
            "model": self.model,
            "messages": self.prompt.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.cache_salt is not None:
            body["cache_salt"] = self.cache_salt
        return json.dumps(body).encode()

    def headers(self) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self.tenant.key}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "X-Request-Id": self.request_id,
        }
        if self.session_id:
            headers["X-Session-Id"] = self.session_id
            if not self.rebuildable:
                headers["X-Session-Rebuildable"] = "false"
        return headers


@dataclass(frozen=True)
class Result:
    outcome: RequestOutcome
    text: str
    """The assistant's answer (a multi-turn session sends it back)."""


class _Hangup(Exception):
    """Raised by a deadline: the request timeout or a timed cancel."""


def run_exchange(
    transport: Transport,
    call: Call,
    *,
    timeout_s: float,
    on_done: Callable[[RequestOutcome], None],
    clock: Callable[[], float] = time.perf_counter,
    wall: Callable[[], float] = time.time,
) -> Result:
    """Send `call`, read its answer, report the outcome (module docstring)."""
    outcome = RequestOutcome(
        request_id=call.request_id,
        scenario=call.scenario,
        phase=call.phase,
        tenant=call.tenant.name,
        traffic_class=call.tenant.traffic_class,
        session_id=call.session_id,
        prompt_tokens=call.prompt.num_tokens,
        max_tokens=call.max_tokens,
        cancel_intended=call.cancel is not None,
        sent_unix=wall(),
    )
    state = StreamState()
    timed_out, cancel_due = _Hangup("timeout"), _Hangup("cancel")
    response: RawResponse | None = None
    t0 = clock()
    try:
        with ExitStack() as deadlines:
            deadlines.enter_context(transport.deadline(timeout_s, timed_out))
            if call.cancel is not None and call.cancel.after_s is not None:
                deadlines.enter_context(transport.deadline(call.cancel.after_s, cancel_due))
            response = transport.open(CHAT_PATH, call.body(), call.headers())
            outcome.http_status = response.status
            _apply_headers(outcome, response.headers)
            if response.status != 200:
                code, message = error_of_body(response.read_all())
                outcome.status, outcome.error_code = Status.ERROR.value, code or f"http_{response.status}"
            elif "application/json" in response.headers.get("content-type", ""):
                _read_whole(outcome, state, response.read_all(), clock())
            else:
                _read_stream(outcome, state, response, call.cancel, clock)
    except _Hangup as hangup:
        is_cancel = hangup is cancel_due
        outcome.status = Status.CANCELLED.value if is_cancel else Status.TIMEOUT.value
        outcome.error_code = "" if is_cancel else ClientCode.TIMEOUT.value
    except TransportError as err:
        outcome.status = (Status.TIMEOUT if err.code is ClientCode.TIMEOUT else Status.ERROR).value
        outcome.error_code = err.code.value
    except Exception:  # a bug in the harness: no row pretends to know what happened
        raise
    except BaseException:  # the run is stopping (GreenletExit, Ctrl-C): still one row, then go
        outcome.status, outcome.error_code = Status.UNFINISHED.value, ClientCode.RUN_STOPPED.value
        outcome.cancel_intended = False  # whatever cancel was planned, the stop ended it, not the cancel
        _finish(outcome, state, t0, clock())
        on_done(outcome)
        raise
    finally:
        if response is not None:
            response.close()
    _finish(outcome, state, t0, clock())
    on_done(outcome)
    return Result(outcome, state.text)


def _apply_headers(outcome: RequestOutcome, headers: Mapping[str, str]) -> None:
    outcome.engine_request_id = headers.get("x-request-id", "")
    outcome.session_rebuilt = headers.get("x-kvgate-session-rebuilt", "") == "true"
    outcome.max_tokens_clamped = "x-kvgate-max-tokens-clamped" in headers
    outcome.approximate = headers.get("x-kvgate-approximate", "") == "true"
    outcome.worker = headers.get("x-kvgate-worker", "")
    outcome.retry_after_s = _seconds(headers.get("retry-after", ""))


def _seconds(value: str) -> float | None:
    """A Retry-After in seconds (the HTTP-date form is not used by inference servers)."""
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _read_stream(
    outcome: RequestOutcome,
    state: StreamState,
    response: RawResponse,
    cancel: Cancel | None,
    clock: Callable[[], float],
) -> None:
    """Read SSE lines until [DONE], the end of the body, or a cancel by content words."""
    after_words = cancel.after_words if cancel is not None else None
    while not state.is_done:
        line = response.readline()
        if not line:
            break
        state.feed(line, clock())
        if after_words is not None and state.num_content_words >= after_words:
            outcome.status = Status.CANCELLED.value
            return
    if state.error_code:
        outcome.status, outcome.error_code = Status.ERROR.value, state.error_code
    elif state.is_malformed:
        outcome.status, outcome.error_code = Status.ERROR.value, ClientCode.BAD_RESPONSE.value
    elif not state.is_done:
        outcome.status, outcome.error_code = Status.ERROR.value, ClientCode.CONNECTION_ERROR.value
    elif state.is_empty:
        outcome.status, outcome.error_code = Status.ERROR.value, ClientCode.EMPTY_ANSWER.value


def _read_whole(outcome: RequestOutcome, state: StreamState, body: bytes, now_s: float) -> None:
    """A server that ignored `stream: true` and sent one JSON body: TTFT is the whole answer."""
    outcome.streaming = False
    if not state.feed_body(body, now_s):
        outcome.status, outcome.error_code = Status.ERROR.value, ClientCode.BAD_RESPONSE.value
    elif state.is_empty:
        outcome.status, outcome.error_code = Status.ERROR.value, ClientCode.EMPTY_ANSWER.value


def _finish(outcome: RequestOutcome, state: StreamState, t0: float, now_s: float) -> None:
    """Fill the parts of the outcome the stream decided."""
    outcome.engine_request_id = outcome.engine_request_id or state.chunk_id
    outcome.e2e_s = now_s - t0
    if state.first_content_s is not None:
        outcome.ttft_s = state.first_content_s - t0
    outcome.finish_reason = state.finish_reason
    usage = state.usage or {}
    outcome.prompt_tokens = usage.get("prompt_tokens", outcome.prompt_tokens)
    outcome.completion_tokens = usage.get("completion_tokens", state.num_content_words)
    ext = state.kvgate or {}
    outcome.session_rebuilt = outcome.session_rebuilt or bool(ext.get("session_rebuilt"))
    outcome.max_tokens_clamped = outcome.max_tokens_clamped or bool(ext.get("max_tokens_clamped"))
    outcome.approximate = outcome.approximate or bool(ext.get("approximate"))
    if ext.get("worker") is not None:
        outcome.worker = str(ext["worker"])
