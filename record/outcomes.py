"""What a requests.csv row's `status`, `http_status` and `error_code` mean: one vocabulary for
the client that writes rows (harness/loadgen/outcome.py) and the gates that judge them.

Status: `ok` (an answer with output in it); `error` (an HTTP error or an error event,
`error_code` = the OpenAI error `code`, or a `ClientCode`); `cancelled` (the client hung up on
purpose: a cancel-storm cancel); `timeout` (no end within the request timeout); `unfinished`
(still open when the harness stopped the run, error_code `run_stopped`: not a cancel anyone
intended, and not served).

A refusal for overload is a 429, 503 or 529 with an error code that is not an OOM or a lost
engine: the server said no, with its reason, as it should under overload.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    UNFINISHED = "unfinished"


class ClientCode(str, Enum):
    """Error codes the client assigns when the server gave none."""

    CONNECTION_ERROR = "connection_error"
    TIMEOUT = "timeout"
    BAD_RESPONSE = "bad_response"  # not an OpenAI answer, or a malformed chunk (even before [DONE])
    EMPTY_ANSWER = "empty_answer"  # a stream or body without any content, reasoning or tool-call output
    RUN_STOPPED = "run_stopped"


OVERLOAD_STATUSES = (429, 503, 529)
"""HTTP statuses a server refuses with for overload: 429 (too many requests, kvgate's admission),
503 (vLLM, SGLang and proxies when saturated), 529 (Dynamo's and Anthropic's "overloaded")."""
OOM_ERROR_CODES = ("out_of_memory", "oom")
"""Error codes that say the engine ran out of memory (replay's client view writes "oom")."""
NOT_OVERLOAD_CODES = (*OOM_ERROR_CODES, "worker_lost")
"""A 503 with one of these codes is a failure, not a refusal: memory ran out, an engine died."""


def is_overload_refusal(http_status: int | None, status: str, error_code: str) -> bool:
    """The rule for one row (`record.query.overload_refusals` applies it to a table)."""
    return (
        http_status in OVERLOAD_STATUSES
        and status == Status.ERROR.value
        and bool(error_code)
        and error_code not in NOT_OVERLOAD_CODES
    )
