"""least_loaded: the worker with the fewest reserved blocks (ties: fewest requests, then in turn).

The router's own figure of load: the worst-case blocks of what is in flight on each worker, known
without asking the worker, and right even while its KV usage lags what it has been promised.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_engine.routing.policy import Decision, LoadOrder, RouteRequest, RoutingContext, WorkerLoad


class LeastLoaded:
    name = "least_loaded"
    reads_prefixes = False

    def __init__(self, context: RoutingContext) -> None:
        self._order = LoadOrder(context.num_workers)

    def choose(self, request: RouteRequest, ready: Sequence[WorkerLoad]) -> Decision:
        turn = self._order.next_turn()
        return Decision(min(ready, key=lambda w: self._order.key(w, turn)).worker)
