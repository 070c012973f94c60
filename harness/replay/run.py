"""One replay, end to end: config + trace + settings -> a run record directory.

    trace = load_trace("conversation_trace.jsonl")
    config = load_config("configs/default.toml")
    result = run_replay(trace, config, ReplaySettings(), Path("runs/r1"), config_path="configs/default.toml")
    RunRecord.load(result.run_dir)

The engine is built exactly as the server builds it (same config, pinned prefixes loaded before
the first request) but on a `VirtualClock`, so the record means the same as a live run's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.replay.capacity import prefill_demand
from harness.replay.driver import Arrival, DriveStats, MaxTokens, ReplayDriver
from harness.replay.meta import initial_state, replay_meta
from harness.replay.prefix_blocks import PrefixBlockMapper
from harness.replay.tenants import DEFAULT_SPEC, make_assigner
from harness.replay.trace import Trace
from record.pressure import record_pressure
from record.run_record import RunMeta, RunRecordWriter
from reference_engine import EngineConfig, EngineCore, VirtualClock


@dataclass(frozen=True, kw_only=True)
class ReplaySettings:
    """How to replay, whatever the policy: the same settings run every config of a comparison."""

    tenants: str = DEFAULT_SPEC
    public_prefix_ids: frozenset[int] = field(default_factory=frozenset)
    max_tokens: MaxTokens = MaxTokens.TRACE
    rate_scale: float = 1.0
    time_scale: float = 1.0
    sample_interval_s: float | None = None  # None: the config's server.sample_interval_s, as live runs
    step_by_step: bool = False

    def as_meta(self, sample_interval_s: float) -> dict[str, Any]:
        """meta.replay's settings (`sample_interval_s`: the one the replay used)."""
        return {
            "tenants": self.tenants,
            "public_prefix_ids": sorted(self.public_prefix_ids),
            "max_tokens": self.max_tokens.value,
            "rate_scale": self.rate_scale,
            "time_scale": self.time_scale,
            "sample_interval_s": sample_interval_s,
            "stepping": "step_by_step" if self.step_by_step else "event_driven",
        }


@dataclass(frozen=True)
class ReplayResult:
    run_dir: Path
    meta: RunMeta
    stats: DriveStats
    wall_s: float

    @property
    def speedup(self) -> float:
        """Virtual (trace) seconds per wall-clock second."""
        return self.stats.end_s / self.wall_s if self.wall_s > 0 else float("inf")


def arrivals_of(trace: Trace, config: EngineConfig, settings: ReplaySettings) -> tuple[Trace, list[Arrival]]:
    """The trace at the settings' rate and time scales, and its requests with their tenants."""
    scaled = trace.rescaled(rate_scale=settings.rate_scale, time_scale=settings.time_scale)
    assigner = make_assigner(settings.tenants, config)
    return scaled, [Arrival(r, assigner.assign(r)) for r in scaled.requests]


def trace_mapper(trace: Trace, core: EngineCore, settings: ReplaySettings) -> PrefixBlockMapper | None:
    """The trace's prefix ids as `core`'s block keys, when the trace has them."""
    if trace.prefix_block_tokens is None:
        return None
    return PrefixBlockMapper(
        block_tokens=core.memory.block_tokens,
        trace_block_tokens=trace.prefix_block_tokens,
        public_scope=core.hasher.public_scope,
        public_ids=settings.public_prefix_ids,
    )


def run_replay(
    trace: Trace,
    config: EngineConfig,
    settings: ReplaySettings,
    run_dir: Path,
    *,
    config_path: str = "",
    on_progress: Callable[[float], None] | None = None,
) -> ReplayResult:
    """Replay `trace` through an engine built from `config`; write the run record to `run_dir`.
    `config_path` only names the config in the record. A P/D pair is not one engine: it replays
    through harness/replay/pd.py."""
    assert not config.pd.enabled, "a [pd] config replays through run_pd_replay, not as one pool"
    scaled, arrivals = arrivals_of(trace, config, settings)
    clock = VirtualClock()
    core = EngineCore(config, clock=clock)
    core.pin_prefixes()
    initial = initial_state(core)
    mapper = trace_mapper(trace, core, settings)
    sample_interval_s = settings.sample_interval_s or config.server.sample_interval_s
    started_unix, t0 = time.time(), time.perf_counter()
    with closing(core), RunRecordWriter(run_dir) as writer:  # closed: a torch disk tier's files go
        driver = ReplayDriver(
            core,
            clock,
            arrivals,
            writer,
            mapper=mapper,
            max_tokens=settings.max_tokens,
            sample_interval_s=sample_interval_s,
            step_by_step=settings.step_by_step,
            scenario=f"replay:{trace.format}",
        )
        stats = driver.run(on_progress)
        wall_s = time.perf_counter() - t0
        meta = replay_meta(
            run_id=run_dir.name,
            core=core,
            config_path=config_path,
            trace=scaled,
            stats=stats,
            started_unix=started_unix,
            wall_s=wall_s,
            initial=initial,
            replay=settings.as_meta(sample_interval_s),
        )
        demand = prefill_demand(scaled, config)
        if demand.is_overloaded:
            meta.notes.append(demand.note(settings.rate_scale))
        writer.write_meta(meta)
    meta = meta.model_copy(update={"pressure": record_pressure(run_dir)})
    return ReplayResult(run_dir, meta, stats, wall_s)
