"""Mooncake (FAST'25) JSON Lines traces: `timestamp` (ms), `input_length`, `output_length`,
`hash_ids` — one id per 512-token prompt block, equal ids meaning an equal prefix up to there.

The ids become the requests' `prefix_ids`; `harness/replay/prefix_blocks.py` turns them into the
engine's block hashes so that shared prefixes really hit the prefix cache.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.replay.loaders.fields import int_field, open_trace
from harness.replay.trace import Trace, TraceError, TraceRequest, sort_by_arrival

BLOCK_TOKENS = 512
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


class MooncakeLoader:
    name = "mooncake"

    def sniff(self, first_line: str) -> bool:
        return first_line.lstrip().startswith("{") and '"hash_ids"' in first_line

    def load(self, path: Path, limit: int | None = None) -> Trace:
        requests: list[TraceRequest] = []
        num_rows = 0
        with open_trace(path) as f:
            for n, line in enumerate(f, start=1):
                if limit is not None and len(requests) >= limit:
                    break
                if not line.strip():
                    continue
                num_rows += 1
                requests.append(self._parse(path, n, line))
        return Trace(
            format=self.name,
            source=path,
            requests=sort_by_arrival(requests),
            prefix_block_tokens=BLOCK_TOKENS,
            num_rows=num_rows,
        )

    def _parse(self, path: Path, n: int, line: str) -> TraceRequest:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise TraceError(f"{path}: line {n}: not JSON ({err.msg})") from None
        missing = [k for k in _FIELDS if k not in obj] if isinstance(obj, dict) else list(_FIELDS)
        if missing:
            raise TraceError(f"{path}: line {n}: missing field(s) {', '.join(missing)}")
        prompt = int_field(path, n, "input_length", obj["input_length"], minimum=1)
        ids = obj["hash_ids"]
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise TraceError(f"{path}: line {n}: hash_ids must be a list of integers")
        if len(ids) != -(-prompt // BLOCK_TOKENS):
            raise TraceError(
                f"{path}: line {n}: {len(ids)} hash_ids for input_length {prompt}; a Mooncake "
                f"trace has one id per {BLOCK_TOKENS}-token block ({-(-prompt // BLOCK_TOKENS)} here)"
            )
        return TraceRequest(
            row=n,
            arrival_s=int_field(path, n, "timestamp", obj["timestamp"]) / 1000,
            num_prompt_tokens=prompt,
            num_output_tokens=int_field(path, n, "output_length", obj["output_length"], minimum=1),
            prefix_ids=tuple(ids),
        )
