"""prefix_aware: the worker whose cached prefix saves the most prefill, against its load.

As Dynamo's KV router scores its workers, each ready worker costs

    cost = overlap_score_weight × (prompt blocks − blocks of the prompt it already holds)
           + blocks reserved on it

and the cheapest wins (ties by load, as least_loaded breaks them). The first term is the prefill
a worker would have to do, the second the work it already carries, both in blocks. What it
holds comes from the fleet's `PrefixIndex`, fed by the workers' KV cache events (as llm-d's
precise prefix-cache scorer reads vLLM's): no events, no matches, and the policy routes by load
alone, which is the failure it must not hide (Dynamo's router that saw zero cached blocks).

Why one hot prefix does not pin one worker: a worker holding a P-block prefix keeps winning it
only while its reservations exceed another's by less than weight × P blocks. Past that bound the
next request goes elsewhere, computes the prefix there, and from then on two workers share it:
the load gap a hot prefix can open is capped at weight × P, whatever the rate.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_engine.routing.policy import Decision, LoadOrder, RouteRequest, RoutingContext, WorkerLoad


class PrefixAware:
    name = "prefix_aware"
    reads_prefixes = True

    def __init__(self, context: RoutingContext) -> None:
        self.index = context.index
        self.weight = context.overlap_score_weight
        self._order = LoadOrder(context.num_workers)

    def choose(self, request: RouteRequest, ready: Sequence[WorkerLoad]) -> Decision:
        matched = self.index.match(request.prefix_keys)
        num_prompt = len(request.prefix_keys)
        turn = self._order.next_turn()

        def cost(w: WorkerLoad) -> tuple[float, tuple[int, int, int]]:
            new_blocks = num_prompt - matched.get(w.worker, 0)
            return self.weight * new_blocks + w.reserved_blocks, self._order.key(w, turn)

        chosen = min(ready, key=cost)
        return Decision(chosen.worker, matched.get(chosen.worker, 0))
