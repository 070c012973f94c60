"""Routing a fleet: which worker (replica) serves a request (docs/server.md, "Routing").

    index = PrefixIndex()                                # fed with each worker's KV cache events
    policy = make_routing_policy("prefix_aware", RoutingContext(num_workers=4, index=index))
    decision = policy.choose(RouteRequest(num_blocks=70, prefix_keys=keys), loads)

Pure: no I/O, no clock. The live router (server/router.py) and a fleet replay
(harness/replay/fleet.py) run the same policies over the same index.
"""

from reference_engine.routing.policy import Decision, RouteRequest, RoutingContext, RoutingPolicy, WorkerLoad
from reference_engine.routing.prefix_index import PrefixIndex, prompt_keys
from reference_engine.routing.registry import ROUTING_POLICIES, make_routing_policy

__all__ = [
    "ROUTING_POLICIES",
    "Decision",
    "PrefixIndex",
    "RouteRequest",
    "RoutingContext",
    "RoutingPolicy",
    "WorkerLoad",
    "make_routing_policy",
    "prompt_keys",
]
