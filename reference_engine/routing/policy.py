"""The routing protocol: a policy chooses one of the ready workers for a request.

A policy sees the request's worst-case blocks and the content keys of its prompt blocks, and
each ready worker's load as the router's reservation ledger counts it; it answers with a worker
and how many prompt blocks it believed that worker holds (0 for a policy that does not look).
Sessions are not its business: the router keeps a session on the worker that holds its KV
before it asks a policy anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from reference_engine.routing.prefix_index import PrefixIndex


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    worker: int
    reserved_blocks: int  # worst-case blocks of the requests in flight on it
    num_requests: int


@dataclass(frozen=True, slots=True)
class RouteRequest:
    num_blocks: int  # the request's worst-case blocks (what it will reserve)
    prefix_keys: Sequence[int] = ()  # content keys of its full prompt blocks (policies that read them)


@dataclass(frozen=True, slots=True)
class Decision:
    worker: int
    matched_blocks: int = 0  # leading prompt blocks the policy believed the worker holds


@dataclass(frozen=True, slots=True)
class RoutingContext:
    """What a policy is built with: the number of worker slots, the fleet's prefix index, and
    prefix_aware's weight of a cached block against a reserved one."""

    num_workers: int
    index: PrefixIndex
    overlap_score_weight: float = 1.0


class RoutingPolicy(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def reads_prefixes(self) -> bool:
        """Whether `choose` reads `RouteRequest.prefix_keys` (the router computes them only then)."""
        ...

    def choose(self, request: RouteRequest, ready: Sequence[WorkerLoad]) -> Decision:
        """One of `ready` (never empty)."""
        ...


class LoadOrder:
    """Least load first: fewest reserved blocks, then fewest requests, then a turn that rotates
    with every call, so an idle fleet spreads its requests instead of piling them on worker 0."""

    def __init__(self, num_workers: int) -> None:
        self.num_workers = num_workers
        self._turn = 0

    def next_turn(self) -> int:
        self._turn += 1
        return self._turn

    def key(self, load: WorkerLoad, turn: int) -> tuple[int, int, int]:
        return load.reserved_blocks, load.num_requests, (load.worker - turn) % self.num_workers
