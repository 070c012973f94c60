"""Trace replay: real request logs through the engine core on a virtual clock (docs/replay.md).

The public face:

    from harness.replay import ReplaySettings, load_trace, run_replay
    trace = load_trace("conversation_trace.jsonl")               # format sniffed: mooncake/azure/burstgpt
    result = run_replay(trace, load_config("configs/default.toml"), ReplaySettings(tenants="hash"),
                        Path("runs/r1"))                           # a run record, as a live run writes
    ReplaySummary.from_record(RunRecord.load(result.run_dir))

Modules: `trace` (the common record, the loader protocol), `loaders/` (one per format),
`tenants` (the `--tenants` registry), `prefix_blocks` (trace ids -> engine block hashes),
`driver` (the loop), `client_view` / `samples` / `meta` (the record's tables), `run` (one replay
end to end), `summary` (printed figures).
"""

from harness.replay.driver import MaxTokens, ReplayStalled
from harness.replay.loaders import LOADERS, load_trace
from harness.replay.run import ReplayResult, ReplaySettings, run_replay
from harness.replay.summary import ReplaySummary
from harness.replay.tenants import ASSIGNERS, AssignmentSpecError, make_assigner
from harness.replay.trace import Trace, TraceError, TraceRequest

__all__ = [
    "ASSIGNERS",
    "AssignmentSpecError",
    "LOADERS",
    "MaxTokens",
    "ReplayResult",
    "ReplaySettings",
    "ReplayStalled",
    "ReplaySummary",
    "Trace",
    "TraceError",
    "TraceRequest",
    "load_trace",
    "make_assigner",
    "run_replay",
]
