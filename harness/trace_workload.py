"""A request trace sent live, open loop: `kvgate run --trace FILE` against any target.

The trace is read by replay's loaders (harness/replay/loaders: Mooncake, Azure 2023, BurstGPT)
and timed by its own arrivals, rescaled (`Trace.rescaled`: `--rate-scale`, `--time-scale`), its
sizes optionally scaled down for a small server (`Trace.resized`: `--size-scale`). Each request
becomes a chat call with the trace's prompt length in the target's tokens (text from its prefix
ids: harness/loadgen/trace_prompts.py) and its output length as `max_tokens`, sent by a tenant picked as
replay picks one (harness/replay/tenants.py, `hash` over the interactive tenants: every turn
of a conversation comes from one tenant, so a tenant-scoped prefix cache can hit it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.loadgen.exchange import Call
from harness.loadgen.open_loop import Arrival
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet
from harness.loadgen.trace_prompts import trace_prompt
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

    def arrivals(self, settings: LoadSettings, tenants: TenantSet, duration_s: float) -> Iterator[Arrival]:
        trace = self.trace.rescaled(rate_scale=self.rate_scale, time_scale=self.time_scale).resized(self.size_scale)
        tokens = settings.tokens
        candidates = {t.name: t for t in tenants.of_class(TRAFFIC_CLASS)}
        factory, _ = ASSIGNERS[DEFAULT_SPEC]
        assigner = factory(list(candidates), None, {})
        for n, request in enumerate(trace.requests):
            if request.arrival_s >= duration_s or (self.max_requests is not None and n >= self.max_requests):
                return
            request_id = f"{self.name}-{request.row}"
            prompt = trace_prompt(
                request.prefix_ids,
                request.num_prompt_tokens,
                block_tokens=trace.prefix_block_tokens,
                filler_seed=request_id,
                tokens=tokens,
            )
            call = Call(
                request_id=request_id,
                scenario=self.name,
                phase=settings.phase,
                tenant=candidates[assigner.assign(request)],
                model=settings.model,
                prompt=prompt,
                max_tokens=request.num_output_tokens,
            )
            yield Arrival(request.arrival_s, call)

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
