"""The common trace record every loader produces, and the loader extension point.

A trace is a list of `TraceRequest`s sorted by arrival. Loaders (one module per format in
`harness/replay/loaders/`) turn a file into a `Trace`; everything downstream — tenant
assignment, prefix hashing, the driver — sees only this record, never a file format.

    KvgateError
    └── TraceError        a trace file that cannot be read: names the file, the row and the fix

Times: `arrival_s` is seconds since the first request of the trace (the trace's own clock,
before `--rate-scale` / `--time-scale`; see `Trace.rescaled`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from record.errors import KvgateError


class TraceError(KvgateError):
    """A trace file that is missing, malformed or of an unknown format."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace, in the trace's own terms.

    `prefix_ids` names the prompt's leading blocks of `Trace.prefix_block_tokens` tokens each:
    two requests whose ids agree up to block j share those (j + 1) blocks of prompt. Empty when
    the trace has no prefix information (Azure, BurstGPT)."""

    row: int  # 1-based data row in the source file: the request's stable name
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    prefix_ids: tuple[int, ...] = ()
    session_id: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    format: str
    source: Path
    requests: list[TraceRequest]
    prefix_block_tokens: int | None = None  # tokens per prefix id; None: no prefix information
    num_rows: int = 0  # data rows read from the file (before skips and --limit)
    notes: list[str] = field(default_factory=list)  # what the loader skipped or assumed, for meta.notes

    @property
    def duration_s(self) -> float:
        return self.requests[-1].arrival_s if self.requests else 0.0

    def rescaled(self, *, rate_scale: float = 1.0, time_scale: float = 1.0) -> Trace:
        """Arrival times mapped to `t · time_scale / rate_scale`.

        `rate_scale` X multiplies the arrival rate (X = 2: twice the requests per second, the
        trace plays in half its time); `time_scale` X stretches the time axis (X = 2: the trace
        plays in twice its time, half the rate). Request sizes and the engine's step times are
        never scaled, which is what makes both a load knob. Both must be positive."""
        for name, value in (("rate_scale", rate_scale), ("time_scale", time_scale)):
            if not value > 0:
                raise TraceError(f"{name} must be a positive number, got {value!r}")
        factor = time_scale / rate_scale
        if factor == 1.0:
            return self
        requests = [dataclasses.replace(r, arrival_s=r.arrival_s * factor) for r in self.requests]
        return dataclasses.replace(self, requests=requests)

    def resized(self, size_scale: float) -> Trace:
        """Every prompt and output length, and the prefix block size, times `size_scale` (each at
        least one token): the trace's arrivals and reuse on a server too small or too slow for
        its sizes (a CPU server with a short context). Reuse keeps its shape: each id still names
        one block, now `size_scale` as long, so requests share the same blocks as before."""
        if not size_scale > 0:
            raise TraceError(f"size_scale must be a positive number, got {size_scale!r}")
        if size_scale == 1.0:
            return self

        def scaled(num_tokens: int) -> int:
            return max(1, round(num_tokens * size_scale))

        requests = [
            dataclasses.replace(
                r, num_prompt_tokens=scaled(r.num_prompt_tokens), num_output_tokens=scaled(r.num_output_tokens)
            )
            for r in self.requests
        ]
        block = scaled(self.prefix_block_tokens) if self.prefix_block_tokens else self.prefix_block_tokens
        return dataclasses.replace(self, requests=requests, prefix_block_tokens=block)


class TraceLoader(Protocol):
    """A trace format: recognise a file by its first line, and read it."""

    name: str

    def sniff(self, first_line: str) -> bool:
        """True when a file whose first line is `first_line` is in this format."""
        ...

    def load(self, path: Path, limit: int | None = None) -> Trace:
        """Read `path` (at most `limit` replayable requests); raise `TraceError` on bad rows."""
        ...


def sort_by_arrival(requests: list[TraceRequest]) -> list[TraceRequest]:
    """Stable sort by arrival, rebased so the first request arrives at 0 s."""
    requests = sorted(requests, key=lambda r: r.arrival_s)
    if requests and requests[0].arrival_s != 0.0:
        t0 = requests[0].arrival_s
        requests = [dataclasses.replace(r, arrival_s=r.arrival_s - t0) for r in requests]
    return requests
