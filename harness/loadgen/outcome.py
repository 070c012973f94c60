"""One request as the client saw it: the `RequestOutcome` that becomes a requests.csv row.

An outcome keeps its send time (and an open-loop request's intended send time) in wall-clock unix
seconds of the process that sent it (`sent_unix`, `intended_unix`) and its durations from a
monotonic clock (`ttft_s`, `e2e_s`), so it can cross processes (a locust worker forwards it to
the master) and be put on the run's time axis only where the record is written: the master
moves it onto its own clock (`on_master`, with the worker's measured clock offset), and
`row(origin_unix)` gives REQUEST_COLUMNS with times in seconds since the run started.

Its `status` and `error_code` speak the record's vocabulary (record/outcomes.py, docs/run_record.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from record.outcomes import ClientCode, Status, is_overload_refusal
from record.run_record import REQUEST_COLUMNS

__all__ = ["ClientCode", "RequestOutcome", "Status", "error_of_body"]


@dataclass(kw_only=True)
class RequestOutcome:
    request_id: str
    scenario: str
    phase: str
    tenant: str
    traffic_class: str
    sent_unix: float
    status: str = Status.OK.value
    engine_request_id: str = ""
    session_id: str = ""
    ttft_s: float | None = None
    e2e_s: float | None = None
    http_status: int | None = None
    error_code: str = ""
    finish_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    max_tokens: int | None = None
    streaming: bool = True
    cancel_intended: bool = False
    session_rebuilt: bool = False
    max_tokens_clamped: bool = False
    approximate: bool = False
    worker: str = ""
    retry_after_s: float | None = None
    """The server's Retry-After on an explicit overload answer (429/503/529): how long a client that
    behaves waits before it asks again. Not a run-record column."""
    intended_unix: float | None = None
    """When an open-loop request was meant to leave (None: a closed-loop user's)."""
    load_worker: str = ""
    """The load generator's process that sent it; the master names it (`on_master`)."""

    @property
    def is_rejection(self) -> bool:
        """An explicit refusal for overload: 429, 503 or 529 with an error code that is not an OOM
        or a lost engine (admission said no, with its reason). The server did what it should
        under overload; gates judge how often."""
        return is_overload_refusal(self.http_status, self.status, self.error_code)

    @property
    def is_failure(self) -> bool:
        """What locust counts as a failure: errors and timeouts, never an intended cancel, an
        explicit rejection, or a request the harness itself cut when it stopped the run (locust
        counts those apart, `UNFINISHED`; the gates count them as offered and not served)."""
        return self.status in (Status.ERROR.value, Status.TIMEOUT.value) and not self.is_rejection

    def to_message(self) -> dict[str, Any]:
        """Plain data for locust's worker -> master messages (msgpack)."""
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> RequestOutcome:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def on_master(self, load_worker: str, clock_offset_s: float) -> RequestOutcome:
        """This outcome as the master records it: named for the process that sent it, its send
        times moved onto the master's clock (`clock_offset_s`: the sender's clock minus the
        master's). Both times move alike, so the client lag is the sender's own."""
        return replace(
            self,
            load_worker=load_worker,
            sent_unix=self.sent_unix - clock_offset_s,
            intended_unix=None if self.intended_unix is None else self.intended_unix - clock_offset_s,
        )

    def row(self, origin_unix: float) -> dict[str, Any]:
        """The requests.csv row, times in seconds since `origin_unix`."""
        sent_s = self.sent_unix - origin_unix
        row = {k: v for k, v in asdict(self).items() if k in REQUEST_COLUMNS}
        row.update(
            sent_s=sent_s,
            first_token_s=None if self.ttft_s is None else sent_s + self.ttft_s,
            done_s=None if self.e2e_s is None else sent_s + self.e2e_s,
            intended_s=None if self.intended_unix is None else self.intended_unix - origin_unix,
        )
        return {c: row.get(c) for c in REQUEST_COLUMNS}


def error_of_body(body: bytes) -> tuple[str, str]:
    """(code, message) of an OpenAI error body; ('', text) when the body is not one."""
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return "", text[:500]
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        return str(err.get("code") or err.get("type") or ""), str(err.get("message", ""))
    if isinstance(err, str):  # some servers: {"error": "message", "code": 429}
        return str(parsed.get("code") or ""), err
    if isinstance(parsed, dict) and "detail" in parsed:  # FastAPI's default error shape
        return "", str(parsed["detail"])[:500]
    return "", text[:500]
