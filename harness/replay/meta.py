"""meta.json of a replay: the same `RunMeta` a live run writes, with mode "replay".

Replay-only facts (trace, scaling, tenant spec, stepping mode, wall time and speed-up) go under
the extra key `replay`; what the pool looked like before the first arrival goes in `initial`,
and after the engine drained in `final`. Phases:
`load` is the trace window [0, last arrival], `cooldown` runs from the last arrival to the first
sample at or after the drain (that sample shows the drained state).
"""

from __future__ import annotations

import dataclasses
import platform
import sys
from typing import Any

from harness.live_meta import package_version, watermarks_of
from harness.replay.driver import DriveStats
from harness.replay.trace import Trace
from harness.sample_rows import Fields, pool_state
from record.run_record import Phase, PoolInfo, RunMeta, Signals, TenantInfo
from reference_engine import EngineCore
from reference_engine.config import redacted


def initial_state(core: EngineCore) -> dict[str, Any]:
    """meta.initial: the pool now (before the first arrival), as final_state has it."""
    return pool_state(Fields(core.snapshot()))


def final_state(core: EngineCore) -> dict[str, Any]:
    pool, sched = core.pool, core.scheduler
    return {
        **initial_state(core),
        "reservations_outstanding": sched.pending_blocks,
        "num_prefix_query_blocks": pool.num_prefix_queries,
        "num_prefix_hit_blocks": pool.num_prefix_hits,
        "num_evicted_cached_blocks": pool.num_evicted_cached,
        "num_alloc_failures": pool.num_alloc_failures,
        "num_oom": sched.num_oom,
        "num_preemptions": {k.value: n for k, n in sched.num_preemptions.items()},
        "recompute_tokens": sched.recompute_tokens,
        "computed_tokens": core.num_computed_tokens,
        "num_engine_steps": core.num_steps,
        "num_rejected": dict(core.num_rejected),
        "policy_stats": dataclasses.asdict(core.policy_stats()),
        **core.tier_state(),
    }


def replay_meta(
    *,
    run_id: str,
    core: EngineCore,
    config_path: str,
    trace: Trace,
    stats: DriveStats,
    started_unix: float,
    wall_s: float,
    initial: dict[str, Any],
    replay: dict[str, Any],
) -> RunMeta:
    """`replay` holds the settings of this replay (scales, tenant spec, stepping, ...)."""
    config, plan = core.config, core.memory
    return RunMeta(
        run_id=run_id,
        mode="replay",
        started_unix=started_unix,
        duration_s=stats.last_sample_s,
        policy=core.policy.name,
        config_path=config_path,
        config_digest=core.digest,
        config=redacted(config),
        scenarios=[str(trace.source)],
        target={
            "kind": "reference",
            "url": "",
            "metrics_url": "",
            "model": config.model.name,
            "executor": config.engine.executor,
        },
        pool=PoolInfo(
            num_blocks=plan.num_blocks,
            block_tokens=plan.block_tokens,
            bytes_per_block=plan.bytes_per_block,
            model=plan.model.name,
            gpu=plan.gpu.name,
        ),
        watermarks=watermarks_of(config),
        tenants={
            t.name: TenantInfo(traffic_class=t.traffic_class.value, max_kv_share=t.config.max_kv_share)
            for t in core.tenants
        },
        phases=[
            Phase(name="load", start_s=0.0, end_s=stats.last_arrival_s),
            Phase(name="cooldown", start_s=stats.last_arrival_s, end_s=stats.last_sample_s),
        ],
        signals=Signals(client_requests=True, engine_events=True, engine_samples=True, tenant_samples=True),
        versions={"kvgate": package_version("kvgate"), "python": platform.python_version()},
        hardware={"cpu": platform.machine(), "platform": sys.platform, "gpu": f"simulated {plan.gpu.name}"},
        initial=initial,
        final=final_state(core),
        notes=list(trace.notes),
        replay={
            "trace": {
                "path": str(trace.source),
                "format": trace.format,
                "num_rows": trace.num_rows,
                "num_requests": len(trace.requests),
                "prefix_block_tokens": trace.prefix_block_tokens,
            },
            **replay,
            "wall_s": wall_s,
            "drained_s": stats.end_s,
            "speedup": stats.end_s / wall_s if wall_s > 0 else None,
            "requests_per_wall_s": len(trace.requests) / wall_s if wall_s > 0 else None,
            "num_driver_iterations": stats.num_iterations,
            "num_refused_at_arrival": stats.num_refused,
        },
    )
