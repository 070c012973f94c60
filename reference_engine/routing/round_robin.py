"""round_robin: each ready worker in turn, whatever it holds or carries.

The baseline a prefix-aware router must beat: it spreads load evenly and places prefixes by
chance, so a prompt's prefix is cached on the worker it lands on about 1/N of the time.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_engine.routing.policy import Decision, RouteRequest, RoutingContext, WorkerLoad


class RoundRobin:
    name = "round_robin"
    reads_prefixes = False

    def __init__(self, context: RoutingContext) -> None:
        self.num_workers = context.num_workers
        self._next = 0

    def choose(self, request: RouteRequest, ready: Sequence[WorkerLoad]) -> Decision:
        """The first ready worker at or after the cursor (cyclically); the cursor moves past it."""
        chosen = min(ready, key=lambda w: (w.worker - self._next) % self.num_workers)
        self._next = (chosen.worker + 1) % self.num_workers
        return Decision(chosen.worker)
