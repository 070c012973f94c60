"""Fleet replay: a trace through N engine cores behind one routing policy, on virtual clocks.

    result = replay_fleet(trace, config, num_workers=4, routing="prefix_aware")
    result.hit_ratio        # prompt tokens served from a prefix cache, over the fleet

Each worker is an `EngineCore` with its own `VirtualClock`; the workers share nothing but the
router, so between two arrivals each runs on alone (`step(until_s=next arrival)`, plans of many
steps). At each arrival every worker is brought to that time, the KV cache events its steps made
are applied to the fleet's `PrefixIndex` (at once: the index is as fresh as it can be), and the
routing policy (reference_engine/routing/, the code the live router runs) chooses among the
workers with their load as the router's ledger counts it: the worst-case blocks of what is in
flight on each. A session stays on its worker, as behind the live router. Prompt blocks are the
trace's (harness/replay/prefix_blocks.py): the same keys in every worker, which is what the
index matches.

`pooled=True` replays the trace through one engine whose pool holds the N workers' blocks
together: the best any routing of the same cache could do, one GPU's compute aside (an engine
serves the whole trace alone, so replay it at a rate one GPU can serve).

No run record is written: this measures routing (docs/benchmarks.md, bench/bench_fleet_replay.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.replay.prefix_blocks import PrefixBlockMapper
from harness.replay.tenants import DEFAULT_SPEC, make_assigner
from harness.replay.trace import Trace, TraceRequest
from record.errors import RequestError
from record.events import EventKind
from reference_engine import EngineConfig, EngineCore, VirtualClock, with_overrides
from reference_engine.core.stepping import run_until
from reference_engine.memory import GIB
from reference_engine.routing import PrefixIndex, RouteRequest, RoutingContext, WorkerLoad, make_routing_policy


@dataclass
class FleetReplayResult:
    routing: str
    num_workers: int
    num_requests: int = 0
    num_refused: int = 0
    prompt_tokens: int = 0  # of the requests admitted (or queued): what the gates' hit ratio divides by
    offered_tokens: int = 0  # of every request, those refused on arrival included
    hit_tokens: int = 0
    requests_by_worker: list[int] = field(default_factory=list)
    virtual_s: float = 0.0

    @property
    def hit_ratio(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def offered_hit_ratio(self) -> float:
        """Hits over every prompt offered: a refused request counts as a miss."""
        return self.hit_tokens / self.offered_tokens if self.offered_tokens else 0.0


class _Worker:
    """One engine of the fleet and what it has told so far."""

    def __init__(self, config: EngineConfig) -> None:
        self.clock = VirtualClock()
        self.core = EngineCore(config, clock=self.clock)
        self.core.pin_prefixes()
        self._cursor = self.core.events.next_cursor
        self.prompt_tokens = 0
        self.hit_tokens = 0

    def run_until(self, t_s: float) -> None:
        """Step until `t_s` (or until nothing is left to run before it); the clock ends at `t_s`."""
        run_until(self.core, self.clock, t_s)
        self._count()

    def _count(self) -> None:
        page = self.core.events.since(self._cursor)
        self._cursor = page.next_cursor
        for e in page.events:
            if e.kind is EventKind.SCHEDULED:
                self.hit_tokens += e.num_tokens or 0
            elif e.kind in (EventKind.ADMITTED, EventKind.QUEUED):
                self.prompt_tokens += e.num_tokens or 0

    def load(self, worker: int) -> WorkerLoad:
        in_flight = self.core.scheduler.requests.values()
        return WorkerLoad(worker, sum(r.estimated_blocks for r in in_flight), len(in_flight))


def replay_fleet(
    trace: Trace,
    config: EngineConfig,
    *,
    num_workers: int,
    routing: str,
    tenants: str = DEFAULT_SPEC,
    rate_scale: float = 1.0,
    pooled: bool = False,
) -> FleetReplayResult:
    """Replay `trace` through `num_workers` engines routed by `routing` (or, `pooled`, one engine
    with all their blocks); prefix blocks come from the trace's ids (it must have them)."""
    if trace.prefix_block_tokens is None:
        raise ValueError(f"{trace.source}: a fleet replay needs a trace with prefix ids (Mooncake's hash_ids)")
    config = with_overrides(config, {"kv_events.enable_kv_cache_events": True})
    if pooled:
        one = EngineCore(config, clock=VirtualClock())
        pool_gib = one.memory.num_blocks * one.memory.bytes_per_block / GIB
        config, num_engines = with_overrides(config, {"hardware.kv_pool_gib": pool_gib * num_workers}), 1
    else:
        num_engines = num_workers
    workers = [_Worker(config) for _ in range(num_engines)]
    index = PrefixIndex()
    policy = make_routing_policy(routing, RoutingContext(num_engines, index, config.server.kv_overlap_score_weight))
    first = workers[0].core
    mapper = PrefixBlockMapper(
        block_tokens=first.memory.block_tokens,
        trace_block_tokens=trace.prefix_block_tokens,
        public_scope=first.hasher.public_scope,
    )
    scopes = {t.name: t.scope for t in first.tenants}
    assigner = make_assigner(tenants, config)
    result = FleetReplayResult("pooled" if pooled else routing, num_workers, requests_by_worker=[0] * num_engines)
    sessions: dict[str, int] = {}
    for request in trace.rescaled(rate_scale=rate_scale).requests:
        for w, worker in enumerate(workers):
            worker.run_until(request.arrival_s)
            kv_events = worker.core.kv_events
            assert kv_events is not None, "the fleet's engines publish KV cache events"
            for event in kv_events.drain():
                index.apply(w, event)
        tenant = assigner.assign(request)
        blocks = mapper.map(request.prefix_ids, request.num_prompt_tokens, scopes[tenant])
        chosen = sessions.get(request.session_id) if request.session_id else None
        if chosen is None:
            chosen = _route(policy, workers, first, request, blocks.block_hashes)
            if request.session_id:
                sessions[request.session_id] = chosen
        result.num_requests += 1
        result.offered_tokens += request.num_prompt_tokens
        result.requests_by_worker[chosen] += 1
        try:
            workers[chosen].core.add_request(
                tenant=tenant,
                num_prompt_tokens=request.num_prompt_tokens,
                prompt_block_hashes=blocks.block_hashes,
                public_prefix_tokens=blocks.public_prefix_tokens,
                max_new_tokens=request.num_output_tokens,
                eos_after=request.num_output_tokens,
                session_id=request.session_id,
                request_id=f"r{request.row}",
            )
        except RequestError:
            result.num_refused += 1
    for worker in workers:
        worker.run_until(math.inf)
    result.prompt_tokens = sum(w.prompt_tokens for w in workers)
    result.hit_tokens = sum(w.hit_tokens for w in workers)
    result.virtual_s = max(w.clock.now() for w in workers)
    for worker in workers:
        worker.core.close()
    return result


def _route(policy, workers: list[_Worker], first: EngineCore, request: TraceRequest, keys: list[int]) -> int:
    """The worker the policy chooses for `request` (its hittable prompt blocks: all but the last token's)."""
    hittable = (request.num_prompt_tokens - 1) // first.memory.block_tokens
    num_blocks = first.admission.blocks_for_tokens(request.num_prompt_tokens + request.num_output_tokens)
    loads = [w.load(i) for i, w in enumerate(workers)]
    return policy.choose(RouteRequest(num_blocks, keys[:hittable]), loads).worker
