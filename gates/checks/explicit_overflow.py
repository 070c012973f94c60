"""explicit_overflow: overflow is told, not hidden — explicit errors, never hangs or truncation.

Over every request that was not cancelled on purpose, three kinds of silent failure are
counted, each against its own limit:
  - hangs: the client timed out (`status` timeout);
  - silent truncation: finished `length` below the requested `max_tokens` without the
    `max_tokens_clamped` flag that says the server shortened it on purpose;
  - unexplained errors: an error without an explicit status and code (400/410/429/503/529 with an
    OpenAI error code), e.g. a dropped connection, a malformed or empty stream (the client says
    so: `bad_response`, `empty_answer`) or a bare 500. A stream that had already
    started (HTTP 200) and then ended with an SSE error event carrying an OpenAI code (the
    router's `worker_lost` when a worker dies mid-answer) is explicit too: that event is the
    only way a server can say why once the status line is sent.
Explicit errors (429 kv_capacity, 410 context_expired, ...) are the right answer to overflow
and are listed in the evidence by code.
"""

from __future__ import annotations

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.outcomes import ClientCode
from record.query import EXPLICIT_STATUSES, flag, intended_cancels
from record.run_record import RunRecord

CLIENT_SIDE_CODES = tuple(code.value for code in ClientCode)  # the client's words, not the server's
STREAM_STARTED = 200  # the status of a stream that ended with an SSE error event


class ExplicitOverflowGate:
    name = "explicit_overflow"
    sources = (Source.CLIENT_REQUESTS,)
    title = "Overflow gets explicit errors"
    metrics = {
        "max_timeouts": "requests that hung until the client timed out",
        "max_silent_truncations": "answers cut at length below max_tokens without the clamp flag",
        "max_unexplained_errors": "errors without an explicit status (400/410/429/503/529) and error code",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        req = record.requests
        if not record.meta.signals.client_requests or req.empty:
            return GateResult.not_measurable(self.name, "no client requests in the record")
        req = req[~intended_cancels(req)]
        found = {
            "max_timeouts": _hangs(req),
            "max_silent_truncations": _truncations(req),
            "max_unexplained_errors": _unexplained(req),
        }
        measurements = [Measurement(metric, len(rows), limits[metric], Unit.COUNT) for metric, rows in found.items()]
        explicit = req[(req["status"] == "error") & ~req.index.isin(found["max_unexplained_errors"].index)]
        evidence = {metric.removeprefix("max_"): rows["request_id"].head(5).tolist() for metric, rows in found.items()}
        evidence["explicit_errors_by_code"] = explicit["error_code"].value_counts().to_dict()
        problems = [
            f"{len(rows)} {metric.removeprefix('max_').replace('_', ' ')}"
            for metric, rows in found.items()
            if len(rows)
        ]
        explanation = (
            f"{', '.join(problems)} among {len(req)} requests"
            if problems
            else f"{len(req)} requests: no hang, no silent truncation, {len(explicit)} explicit errors"
        )
        return GateResult.judged(self.name, measurements, explanation, evidence)


def _hangs(req: pd.DataFrame) -> pd.DataFrame:
    return req[(req["status"] == "timeout") | (req["error_code"] == "timeout")]


def _truncations(req: pd.DataFrame) -> pd.DataFrame:
    short = req["completion_tokens"] < req["max_tokens"]
    return req[(req["status"] == "ok") & (req["finish_reason"] == "length") & short & ~flag(req["max_tokens_clamped"])]


def _unexplained(req: pd.DataFrame) -> pd.DataFrame:
    errors = req[(req["status"] == "error") & (req["error_code"] != "timeout")]
    said_why = errors["http_status"].isin(EXPLICIT_STATUSES) | (errors["http_status"] == STREAM_STARTED)
    explicit = said_why & errors["error_code"].notna() & ~errors["error_code"].isin(CLIENT_SIDE_CODES)
    return errors[~explicit]
