"""The client's view of a replay (requests.csv), derived from engine events.

A live run records what the client saw; replay has no client, so it reconstructs the same row
from what the engine emitted: `sent_s` is the trace arrival, `first_token_s` the `first_token`
event, `done_s` the `finished` event. The engine learns of a request only at the step boundary
at or after its arrival (the clock cannot go back), so a client's TTFT includes the wait for the
step in flight, as a live client's does. A request the engine refused at once (`add_request`
raised) ends at that boundary with the error's HTTP status and code, as a 4xx response would.

Status of a request that finished, by the engine's finish reason:

    stop, length        ok      200
    rejected            error   429, error_code = the `rejected` event's reason (queue_deadline)
    oom                 error   503, error_code "oom"
    anything else       error   503, error_code = the finish reason
"""

from __future__ import annotations

from collections.abc import Iterable

from record.errors import RequestError
from record.events import Event, EventKind
from reference_engine.request import Request

_OK_REASONS = frozenset({"stop", "length"})
_REJECTED = "rejected"


class ClientView:
    """Builds one requests.csv row per request. `_open` holds rows of requests still in the engine
    (keyed by request id); a row leaves it, complete, on the request's `finished` event."""

    def __init__(self, scenario: str, phase: str = "load") -> None:
        self.scenario = scenario
        self.phase = phase
        self._open: dict[str, tuple[dict, Request]] = {}

    def _row(
        self,
        request_id: str,
        tenant: str,
        traffic_class: str,
        sent_s: float,
        prompt_tokens: int,
        max_tokens: int | None,
        session_id: str | None,
    ) -> dict:
        return {
            "request_id": request_id,
            "engine_request_id": request_id,
            "scenario": self.scenario,
            "phase": self.phase,
            "tenant": tenant,
            "traffic_class": traffic_class,
            "session_id": session_id,
            "sent_s": sent_s,
            "prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens,
            "streaming": True,
            "cancel_intended": False,
            "completion_tokens": 0,
        }

    def sent(self, r: Request, sent_s: float, max_tokens: int | None = None) -> None:
        """`r`, sent at `sent_s`, was admitted or queued: its row completes when it finishes.
        `max_tokens`: what the client asked for, when `r` is only the first part of its answer
        (the prefill of a P/D pair)."""
        asked = r.requested_max_new_tokens if max_tokens is None else max_tokens
        row = self._row(r.request_id, r.tenant, r.traffic_class.value, sent_s, r.num_prompt_tokens, asked, r.session_id)
        self._open[r.request_id] = (row, r)

    def refused(
        self,
        request_id: str,
        tenant: str,
        traffic_class: str,
        sent_s: float,
        done_s: float,
        prompt_tokens: int,
        max_tokens: int | None,
        session_id: str | None,
        err: RequestError,
    ) -> dict:
        """The complete row of a request `add_request` refused at `done_s`."""
        row = self._row(request_id, tenant, traffic_class, sent_s, prompt_tokens, max_tokens, session_id)
        row.update(done_s=done_s, e2e_s=done_s - sent_s, status="error", http_status=err.status, error_code=err.code)
        return row

    def observe(self, events: Iterable[Event]) -> list[dict]:
        """Apply engine events; returns the rows of requests that finished."""
        done: list[dict] = []
        for e in events:
            kind, request_id = e.kind, e.request_id
            if request_id is None:  # engine-wide (watermark, worker_died): no request to update
                continue
            if kind is EventKind.FIRST_TOKEN:
                entry = self._open.get(request_id)
                if entry is not None:
                    row = entry[0]
                    row["first_token_s"] = e.t_s
                    row["ttft_s"] = e.t_s - row["sent_s"]
            elif kind is EventKind.REJECTED:
                entry = self._open.get(request_id)
                if entry is not None:  # left the queue (queue_deadline); refusals at arrival are not open
                    entry[0]["error_code"] = e.reason
            elif kind is EventKind.FINISHED:
                entry = self._open.pop(request_id, None)
                if entry is not None:
                    done.append(self._finish(*entry, e))
        return done

    def _finish(self, row: dict, r: Request, e: Event) -> dict:
        reason = e.reason or ""
        row.update(
            done_s=e.t_s,
            e2e_s=e.t_s - row["sent_s"],
            finish_reason=reason,
            completion_tokens=e.num_tokens,
            session_rebuilt=r.session_rebuilt,
            max_tokens_clamped=r.max_tokens_clamped,
            approximate=r.approximate,
        )
        if reason in _OK_REASONS:
            row.update(status="ok", http_status=200)
        elif reason == _REJECTED:
            row.update(status="error", http_status=429)
        else:
            row.update(status="error", http_status=503, error_code=reason)
        return row

    def give_up(self, t_s: float) -> list[dict]:
        """The rows of requests still open at `t_s`, the end of the run: the client stopped
        waiting for an answer that never came (status timeout), as a live client's timeout."""
        rows = []
        for row, _ in self._open.values():
            row.update(done_s=t_s, e2e_s=t_s - row["sent_s"], status="timeout", error_code="timeout")
            rows.append(row)
        self._open.clear()
        return rows

    @property
    def num_open(self) -> int:
        return len(self._open)
