"""The open-loop workload a run's settings ask for: a trace, chat at a rate, or none.

    workload = workload_of(settings)     # None: no open loop (locust's users)

One reading of the settings for everyone who needs the workload: `kvgate run` (to check the
options and name the run before it starts) and the locust master that deals its schedule.
"""

from __future__ import annotations

from pathlib import Path

from harness.loadgen.arrivals import Arrivals, arrival_kind
from harness.loadgen.chat_workload import ChatWorkload
from harness.loadgen.schedule import Workload
from harness.loadgen.settings import LoadSettings
from harness.loadgen.trace_workload import TraceWorkload
from harness.replay.loaders import load_trace


def workload_of(settings: LoadSettings) -> Workload | None:
    """`trace` wins over `rate`; `max_requests` 0 bounds nothing. A trace that cannot be read
    raises its loader's error (a KvgateError that names the file)."""
    max_requests = settings.max_requests or None
    if settings.trace:
        return TraceWorkload(
            trace=load_trace(Path(settings.trace), settings.trace_format),
            rate_scale=settings.rate_scale,
            time_scale=settings.time_scale,
            size_scale=settings.size_scale,
            max_requests=max_requests,
        )
    if settings.rate > 0:
        schedule = Arrivals(
            kind=arrival_kind(settings.arrivals),
            rate_per_s=settings.rate,
            seed=settings.arrival_seed,
            burst_size=settings.arrival_burst_size,
        )
        return ChatWorkload(schedule=schedule, max_requests=max_requests)
    return None
