"""Trace loaders: one module per format, registered once here, resolved by name or by sniffing.

    load_trace(path, "auto")        # the format whose `sniff` accepts the file's first line
    load_trace(path, "mooncake", limit=100)

Add a format by writing a `TraceLoader` (harness/replay/trace.py) and listing it in `_LOADERS`.
"""

from __future__ import annotations

from pathlib import Path

from harness.replay.loaders.azure import AzureLoader
from harness.replay.loaders.burstgpt import BurstGptLoader
from harness.replay.loaders.fields import open_trace
from harness.replay.loaders.mooncake import MooncakeLoader
from harness.replay.trace import Trace, TraceError, TraceLoader
from record.errors import UnknownNameError

AUTO = "auto"
_LOADERS: tuple[TraceLoader, ...] = (MooncakeLoader(), AzureLoader(), BurstGptLoader())
LOADERS: dict[str, TraceLoader] = {loader.name: loader for loader in _LOADERS}


def get_loader(name: str) -> TraceLoader:
    try:
        return LOADERS[name]
    except KeyError:
        raise UnknownNameError("trace format", name, [AUTO, *LOADERS]) from None


def detect_format(path: Path) -> str:
    """The name of the only loader that recognises the file's first line."""
    with open_trace(path) as f:
        first = f.readline()
    matches = [loader.name for loader in _LOADERS if loader.sniff(first)]
    if len(matches) != 1:
        raise TraceError(
            f"{path}: cannot tell the trace format from its first line {first.strip()[:80]!r}; "
            f"pass --format ({', '.join(LOADERS)})"
        )
    return matches[0]


def load_trace(path: str | Path, fmt: str = AUTO, limit: int | None = None) -> Trace:
    """Read a trace file; `limit` keeps the first N replayable requests."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise TraceError(f"--limit must be at least 1, got {limit}")
    name = detect_format(path) if fmt == AUTO else fmt
    trace = get_loader(name).load(path, limit)
    if not trace.requests:
        raise TraceError(f"{path}: no replayable request in this {name} trace")
    return trace
