"""Routing policy factory: `make_routing_policy(name, context)`; every policy registered once."""

from __future__ import annotations

from collections.abc import Callable

from record.errors import UnknownNameError
from reference_engine.config import RoutingPolicyName
from reference_engine.routing.least_loaded import LeastLoaded
from reference_engine.routing.policy import RoutingContext, RoutingPolicy
from reference_engine.routing.prefix_aware import PrefixAware
from reference_engine.routing.round_robin import RoundRobin

ROUTING_POLICIES: dict[str, Callable[[RoutingContext], RoutingPolicy]] = {
    RoutingPolicyName.LEAST_LOADED.value: LeastLoaded,
    RoutingPolicyName.ROUND_ROBIN.value: RoundRobin,
    RoutingPolicyName.PREFIX_AWARE.value: PrefixAware,
}


def make_routing_policy(name: str | RoutingPolicyName, context: RoutingContext) -> RoutingPolicy:
    key = name.value if isinstance(name, RoutingPolicyName) else name
    try:
        factory = ROUTING_POLICIES[key]
    except KeyError:
        raise UnknownNameError("routing policy", key, ROUTING_POLICIES) from None
    return factory(context)
