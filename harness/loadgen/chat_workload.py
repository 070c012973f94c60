"""Chat at a rate: the open-loop twin of the short_qa scenario's traffic, for `kvgate run --rate`
and `kvgate sweep`.

Every request is what short_qa sends — a chat prompt of `prompt_tokens` tokens behind the
shared system prompt, `max_tokens` of answer, from the interactive tenants in turn — so it is
critical interactive traffic (gates/slo.py) and the TTFT objective and goodput judge it. Only
the timing differs: the arrivals' schedule (loadgen/arrivals.py) instead of users who wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.loadgen.arrivals import Arrivals
from harness.loadgen.schedule import ChatText, Slot
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet

TRAFFIC_CLASS = "interactive"


@dataclass(frozen=True, kw_only=True)
class ChatWorkload:
    schedule: Arrivals
    max_requests: int | None = None
    name: str = "open_loop_chat"

    def slots(self, settings: LoadSettings, tenants: TenantSet, duration_s: float) -> Iterator[Slot]:
        candidates = tenants.of_class(TRAFFIC_CLASS)
        for n, at_s in enumerate(self.schedule.times(duration_s=duration_s, max_requests=self.max_requests)):
            request_id = f"{self.name}-{n}"
            yield Slot(
                index=n,
                at_s=at_s,
                request_id=request_id,
                scenario=self.name,
                tenant=candidates[n % len(candidates)].name,
                max_tokens=settings.max_tokens,
                text=ChatText(num_tokens=settings.prompt_tokens, seed=request_id),
            )

    def describe(self) -> dict[str, Any]:
        return {"workload": self.name, "arrivals": self.schedule.describe(), "max_requests": self.max_requests}
