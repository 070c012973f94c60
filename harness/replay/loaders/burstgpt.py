"""BurstGPT CSV: `Timestamp` (s), `Model`, `Request tokens`, `Response tokens`, `Total tokens`,
`Log Type`.

The dataset defines a row with 0 response tokens as a *failed* request: the service answered
nothing. Replay cannot make the engine fail a request on purpose, and sending it would replay a
success that never happened, so such rows are skipped and counted in the trace notes (they end
up in `meta.notes` of the run record). Rows with 0 request tokens cannot be sent at all (an
empty prompt) and are skipped and counted the same way. No prefix information: no prefix hits.
"""

from __future__ import annotations

from pathlib import Path

from harness.replay.loaders.fields import csv_rows, int_field
from harness.replay.trace import Trace, TraceRequest, sort_by_arrival

_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens")


class BurstGptLoader:
    name = "burstgpt"

    def sniff(self, first_line: str) -> bool:
        return first_line.strip().lstrip("\ufeff").startswith("Timestamp,Model,Request tokens")

    def load(self, path: Path, limit: int | None = None) -> Trace:
        requests: list[TraceRequest] = []
        num_rows = num_failed = num_empty = 0
        for n, row in csv_rows(path, _COLUMNS):
            if limit is not None and len(requests) >= limit:
                break
            num_rows += 1
            prompt = int_field(path, n, "Request tokens", row["Request tokens"])
            output = int_field(path, n, "Response tokens", row["Response tokens"])
            if output == 0:
                num_failed += 1
                continue
            if prompt == 0:
                num_empty += 1
                continue
            requests.append(
                TraceRequest(
                    row=n,
                    arrival_s=float(int_field(path, n, "Timestamp", row["Timestamp"])),
                    num_prompt_tokens=prompt,
                    num_output_tokens=output,
                    model=row["Model"] or None,
                )
            )
        notes = ["burstgpt trace: no prefix information, so no request hits the prefix cache"]
        if num_failed:
            notes.append(
                f"burstgpt trace: skipped {num_failed} failed request(s) (0 response tokens, "
                f"as the dataset marks a failure)"
            )
        if num_empty:
            notes.append(f"burstgpt trace: skipped {num_empty} request(s) with 0 request tokens (empty prompt)")
        return Trace(format=self.name, source=path, requests=sort_by_arrival(requests), num_rows=num_rows, notes=notes)
