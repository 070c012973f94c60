"""A request trace as an open-loop schedule: `kvgate run --trace FILE` against any target.

The trace is read by replay's loaders (harness/replay/loaders: Mooncake, Azure 2023, BurstGPT)
and timed by its own arrivals, rescaled (`Trace.rescaled`: `--rate-scale`, `--time-scale`), its
sizes optionally scaled down for a small server (`Trace.resized`: `--size-scale`). Each request
becomes a slot with the trace's prompt length in the target's tokens (its text from the prefix
ids: loadgen/trace_prompts.py, built by the sender) and its output length as `max_tokens`, sent
by a tenant picked as replay picks one (harness/replay/tenants.py, `hash` over the interactive
tenants: every turn of a conversation comes from one tenant, so a tenant-scoped prefix cache can
hit it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.loadgen.schedule import Slot, TraceText
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet
from harness.replay.tenants import ASSIGNERS, DEFAULT_SPEC
from harness.replay.trace import Trace

TRAFFIC_CLASS = "interactive"


@dataclass(frozen=True, kw_only=True)
class TraceWorkload:
    trace: Trace
    rate_scale: float = 1.0
    time_scale: float = 1.0
    size_scale: float = 1.0
    max_requests: int | None = None

    @property
    def name(self) -> str:
        return f"trace_{self.trace.format}"

    def slots(self, settings: LoadSettings, tenants: TenantSet, duration_s: float) -> Iterator[Slot]:
        trace = self.trace.rescaled(rate_scale=self.rate_scale, time_scale=self.time_scale).resized(self.size_scale)
        factory, _ = ASSIGNERS[DEFAULT_SPEC]
        assigner = factory([t.name for t in tenants.of_class(TRAFFIC_CLASS)], None, {})
        for n, request in enumerate(trace.requests):
            if request.arrival_s >= duration_s or (self.max_requests is not None and n >= self.max_requests):
                return
            request_id = f"{self.name}-{request.row}"
            text = TraceText(
                prefix_ids=tuple(request.prefix_ids),
                num_tokens=request.num_prompt_tokens,
                block_tokens=trace.prefix_block_tokens,
                filler_seed=request_id,
            )
            yield Slot(
                index=n,
                at_s=request.arrival_s,
                request_id=request_id,
                scenario=self.name,
                tenant=assigner.assign(request),
                max_tokens=request.num_output_tokens,
                text=text,
            )

    def describe(self) -> dict[str, Any]:
        return {
            "workload": self.name,
            "trace": str(self.trace.source),
            "format": self.trace.format,
            "rate_scale": self.rate_scale,
            "time_scale": self.time_scale,
            "size_scale": self.size_scale,
            "trace_requests": len(self.trace.requests),
            "max_requests": self.max_requests,
            "notes": list(self.trace.notes),
        }
