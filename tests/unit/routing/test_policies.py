"""Routing policies: each one's choice among ready workers, and the factory's names."""

from __future__ import annotations

import pytest

from record.errors import UnknownNameError
from reference_engine.core.kv_events import BlockStored
from reference_engine.routing import (
    ROUTING_POLICIES,
    PrefixIndex,
    RouteRequest,
    RoutingContext,
    WorkerLoad,
    make_routing_policy,
    prompt_keys,
)

IDLE = [WorkerLoad(w, 0, 0) for w in range(3)]


def policy(name: str, index: PrefixIndex | None = None, weight: float = 1.0):
    return make_routing_policy(name, RoutingContext(3, index or PrefixIndex(), weight))


def test_the_factory_names_every_policy_when_one_is_unknown():
    assert set(ROUTING_POLICIES) == {"least_loaded", "round_robin", "prefix_aware"}
    with pytest.raises(UnknownNameError, match="least_loaded, prefix_aware, round_robin"):
        policy("random")


def test_round_robin_takes_each_ready_worker_in_turn_skipping_the_others():
    rr = policy("round_robin")
    assert [rr.choose(RouteRequest(1), IDLE).worker for _ in range(4)] == [0, 1, 2, 0]
    without_2 = IDLE[:2]
    assert [rr.choose(RouteRequest(1), without_2).worker for _ in range(3)] == [1, 0, 1]


def test_least_loaded_takes_the_fewest_reserved_blocks_and_rotates_ties():
    ll = policy("least_loaded")
    loads = [WorkerLoad(0, 50, 1), WorkerLoad(1, 10, 3), WorkerLoad(2, 10, 2)]
    assert ll.choose(RouteRequest(1), loads).worker == 2
    assert {ll.choose(RouteRequest(1), IDLE).worker for _ in range(3)} == {0, 1, 2}


def test_prefix_aware_goes_where_the_prefix_is_until_the_load_gap_passes_its_worth():
    index = PrefixIndex()
    prompt = list(range(160))  # 10 blocks, 9 the engine could hit
    index.apply(1, BlockStored(list(range(10)), None, prompt, 16))
    pa = policy("prefix_aware", index)
    keys = prompt_keys(prompt[:-1], 16)
    decision = pa.choose(RouteRequest(20, keys), IDLE)
    assert (decision.worker, decision.matched_blocks) == (1, 9)
    # 9 cached blocks are worth 9 reserved ones: a hot prefix can open a gap of 9 blocks, no more
    assert pa.choose(RouteRequest(20, keys), [WorkerLoad(0, 0, 0), WorkerLoad(1, 8, 1)]).worker == 1
    assert pa.choose(RouteRequest(20, keys), [WorkerLoad(0, 0, 0), WorkerLoad(1, 10, 1)]).worker == 0
    assert pa.choose(RouteRequest(20, keys), IDLE[:1]).matched_blocks == 0  # only worker 0 is ready


def test_prefix_aware_with_an_empty_index_routes_by_load_alone():
    pa = policy("prefix_aware")
    loads = [WorkerLoad(0, 30, 1), WorkerLoad(1, 5, 1), WorkerLoad(2, 40, 1)]
    assert pa.choose(RouteRequest(20, prompt_keys(list(range(64)), 16)), loads).worker == 1


def test_a_weight_of_zero_ignores_the_prefix():
    index = PrefixIndex()
    index.apply(2, BlockStored([1, 2], None, list(range(32)), 16))
    pa = policy("prefix_aware", index, weight=0.0)
    loads = [WorkerLoad(0, 0, 0), WorkerLoad(1, 5, 0), WorkerLoad(2, 1, 0)]
    assert pa.choose(RouteRequest(4, prompt_keys(list(range(32)), 16)), loads).worker == 0
