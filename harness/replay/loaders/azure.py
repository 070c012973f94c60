"""Azure LLM inference trace 2023 (Splitwise) CSV: `TIMESTAMP, ContextTokens, GeneratedTokens`.

There is no prefix or session information: replayed requests share no prefix blocks, so the
prefix cache never hits (arrival and length patterns only). Timestamps are wall-clock strings
with 100 ns ticks; they become seconds since the first row (microsecond precision).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from harness.replay.loaders.fields import csv_rows, int_field
from harness.replay.trace import Trace, TraceError, TraceRequest, sort_by_arrival

_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class AzureLoader:
    name = "azure"

    def sniff(self, first_line: str) -> bool:
        return first_line.strip().lstrip("\ufeff").startswith(",".join(_COLUMNS))

    def load(self, path: Path, limit: int | None = None) -> Trace:
        requests: list[TraceRequest] = []
        origin: datetime | None = None
        num_rows = 0
        for n, row in csv_rows(path, _COLUMNS):
            if limit is not None and len(requests) >= limit:
                break
            num_rows += 1
            try:
                t = datetime.fromisoformat(row["TIMESTAMP"].strip())
            except ValueError:
                raise TraceError(
                    f"{path}: row {n}: TIMESTAMP {row['TIMESTAMP']!r} is not 'YYYY-MM-DD HH:MM:SS.fffffff'"
                ) from None
            origin = origin or t
            requests.append(
                TraceRequest(
                    row=n,
                    arrival_s=(t - origin).total_seconds(),
                    num_prompt_tokens=int_field(path, n, "ContextTokens", row["ContextTokens"], minimum=1),
                    num_output_tokens=int_field(path, n, "GeneratedTokens", row["GeneratedTokens"], minimum=1),
                )
            )
        return Trace(
            format=self.name,
            source=path,
            requests=sort_by_arrival(requests),
            num_rows=num_rows,
            notes=["azure trace: no prefix information, so no request hits the prefix cache"],
        )
