"""P/D replay: a trace through `PDCore` (reference_engine/core/pd.py) into a run record whose two
replicas are the prefill and the decode pool, so the gates judge each (gates/fleet.py).

    result = run_pd_replay(trace, config, settings, Path("runs/pd"), chaos=PdChaos(cancel_every=4))

The record as a fleet's: requests.csv from the P/D requests' own events (what a client sees:
the decode side's first token, one finish); events.csv every event of both engines, each naming
its `worker` (prefill, decode), with the transfers' events on the decode side; replica_samples.csv
each pool at every sample, samples.csv the two summed; replicas.csv each pool before and after;
meta.final the pools summed and `pd`: transfers, failures, the decode blocks still reserved for
requests that ended (`stranded_reservation_blocks`) and the transfers nobody resolved.

`PdChaos.cancel_every` has the pair cancel every n-th transfer the moment it starts
(`PDCore.cancel_every`): the cancel that lands mid-transfer, timed to the transfer (which only
the engine can know; a client times it from its first token, pd_scenarios/pd_chaos.py).
"""

from __future__ import annotations

import math
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.replay.client_view import ClientView
from harness.replay.driver import Arrival, DriveStats, Intake
from harness.replay.meta import replay_meta
from harness.replay.run import ReplayResult, ReplaySettings, arrivals_of, trace_mapper
from harness.replay.trace import Trace
from harness.sample_rows import Fields, pool_state, sample_row
from record.errors import RequestError
from record.events import Event, EventKind
from record.fleet import PD_TARGET, fleet_state, summed_samples
from record.pressure import record_pressure
from record.run_record import HIT_COUNTERS, RunMeta, RunRecordWriter
from reference_engine import EngineConfig, config_digest
from reference_engine.config import redacted
from reference_engine.core.event_log import EventLog
from reference_engine.core.pd import CLIENT_KINDS, DECODE, ROLES, PDCore, PdRequest


@dataclass(frozen=True)
class PdChaos:
    cancel_every: int = 0  # cancel every n-th transfer as it starts (0: none)


class _Recorder:
    """Reads the three event logs and the two pools into the record's tables."""

    def __init__(self, pd: PDCore, writer: RunRecordWriter, scenario: str) -> None:
        self.pd, self.writer = pd, writer
        self.view = ClientView(scenario)
        self.logs = {role: pd.sides[role].core.events for role in ROLES}
        self.cursors = {role: log.next_cursor for role, log in self.logs.items()}
        self.cursors["pd"] = pd.events.next_cursor
        self.num_events = 0
        self.num_samples = 0
        self.sent: dict[str, PdRequest] = {}  # until it ends

    def drain(self) -> None:
        """Write the new events, and the rows of the requests that ended."""
        rows: list[dict[str, Any]] = []
        for role, log in self.logs.items():
            rows += [self._row(e, role) for e in self._since(role, log)]
        mine = self._since("pd", self.pd.events)
        rows += [self._row(e, DECODE) for e in mine if e.kind not in CLIENT_KINDS]
        self.writer.append("events", sorted(rows, key=lambda row: row["t_s"]))
        cancelled = {e.request_id for e in mine if e.kind is EventKind.CANCEL_RECEIVED}  # only the chaos cancels
        done = self.view.observe(e for e in mine if e.kind in CLIENT_KINDS)
        for row in done:
            if row["request_id"] in cancelled:  # the client hung up: as a live cancel is written
                row.update(status="cancelled", cancel_intended=True)
            answer = self.sent.pop(row["request_id"]).decode
            if answer is not None:  # the answer's flags are the decode side's (the view knew the prefill)
                row.update(max_tokens_clamped=answer.max_tokens_clamped, approximate=answer.approximate)
        self.writer.append("requests", done)

    def _since(self, name: str, log: EventLog) -> list[Event]:
        page = log.since(self.cursors[name])
        self.cursors[name] = page.next_cursor
        return page.events

    def _row(self, e: Event, role: str) -> dict[str, Any]:
        self.num_events += 1
        return {**e.to_row(), "seq": self.num_events - 1, "worker": role}

    def sample(self, t_s: float) -> None:
        rows = []
        for role in ROLES:
            core = self.pd.sides[role].core
            bt = core.memory.block_tokens
            hits = {HIT_COUNTERS[0]: core.pool.num_prefix_queries * bt, HIT_COUNTERS[1]: core.pool.num_prefix_hits * bt}
            rows.append({"replica": role, **sample_row(Fields(core.snapshot()), t_s), **hits})
        self.writer.append("replica_samples", rows)
        summed = summed_samples(rows)
        fleet = {k: v for k, v in summed.items() if k not in HIT_COUNTERS}
        self.writer.append("samples", [{**fleet, "t_s": t_s, "source": "engine"}])
        self.num_samples += 1


def run_pd_replay(
    trace: Trace,
    config: EngineConfig,
    settings: ReplaySettings,
    run_dir: Path,
    *,
    config_path: str = "",
    chaos: PdChaos = PdChaos(),
) -> ReplayResult:
    """Replay `trace` through the P/D pair `config` describes; write the run record to `run_dir`."""
    scaled, arrivals = arrivals_of(trace, config, settings)
    pd = PDCore(config)
    pd.cancel_every = chaos.cancel_every
    for side in pd.sides.values():
        side.core.pin_prefixes()
    initial = {role: pool_state(Fields(pd.sides[role].core.snapshot())) for role in ROLES}
    scopes = {t.name: t.scope for t in pd.prefill.tenants}  # both sides key a tenant alike
    intake = Intake(trace_mapper(trace, pd.prefill, settings), scopes, settings.max_tokens)
    interval = settings.sample_interval_s or config.server.sample_interval_s
    started_unix, t0 = time.time(), time.perf_counter()
    with closing(pd), RunRecordWriter(run_dir) as writer:
        rec = _Recorder(pd, writer, f"replay:{trace.format}:pd")
        refused, i = 0, 0
        while i < len(arrivals) or pd.has_work():
            next_arrival = arrivals[i].request.arrival_s if i < len(arrivals) else math.inf
            next_sample = rec.num_samples * interval
            if math.isinf(next_arrival) and next_sample > pd.now() + interval:
                next_sample = math.inf  # draining: sample as time passes, not ahead of it
            pd.run_until(min(next_arrival, next_sample, pd.now() + interval))
            rec.drain()
            while rec.num_samples * interval <= pd.now():
                rec.sample(rec.num_samples * interval)
            while i < len(arrivals) and arrivals[i].request.arrival_s <= pd.now():
                row = _submit(pd, rec, arrivals[i], intake)
                if row is not None:
                    refused += 1
                    writer.append("requests", [row])
                i += 1
            if math.isinf(next_arrival) and not pd.has_work():
                break
        rec.drain()
        last_sample_s = rec.num_samples * interval
        rec.sample(last_sample_s)
        writer.append("requests", rec.view.give_up(pd.now()))  # requests that never ended
        last = arrivals[-1].request.arrival_s if arrivals else 0.0
        stats = DriveStats(pd.now(), last, last_sample_s, rec.num_samples, refused)
        wall_s = time.perf_counter() - t0
        replay = {**settings.as_meta(interval), "stepping": "pd_pair"}
        meta = _meta(pd, config, run_dir.name, config_path, scaled, stats, started_unix, wall_s, initial, replay)
        writer.append("replicas", _replica_rows(pd, initial))
        writer.write_meta(meta)
    meta = meta.model_copy(update={"pressure": record_pressure(run_dir)})
    return ReplayResult(run_dir, meta, stats, time.perf_counter() - t0)


def _submit(pd: PDCore, rec: _Recorder, a: Arrival, intake: Intake) -> dict | None:
    """Send one arrival; the complete row of a request refused at once, else None."""
    try:
        r = pd.add_request(**intake.arguments(a))
    except RequestError as err:
        return intake.refused(rec.view, a, pd.prefill.tenants[a.tenant].traffic_class.value, pd.now(), err)
    rec.sent[r.request_id] = r
    rec.view.sent(r.prefill, a.request.arrival_s, max_tokens=intake.limit(a.request))
    return None


def _final(pd: PDCore, role: str) -> dict[str, Any]:
    return pool_state(Fields(pd.sides[role].core.snapshot()))


def _replica_rows(pd: PDCore, initial: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for role in ROLES:
        core = pd.sides[role].core
        bt = core.memory.block_tokens
        row: dict[str, Any] = {"replica": role, "url": "", "metrics_url": "", "worker": role, "block_tokens": bt}
        row.update({f"initial_{k}": v for k, v in initial[role].items()})
        row.update({f"final_{k}": v for k, v in _final(pd, role).items()})
        row.update(
            prefix_cache_queries_tokens=core.pool.num_prefix_queries * bt,
            prefix_cache_hits_tokens=core.pool.num_prefix_hits * bt,
            num_preemptions=sum(core.scheduler.num_preemptions.values()),
        )
        rows.append(row)
    return rows


def _meta(
    pd: PDCore,
    config: EngineConfig,
    run_id: str,
    config_path: str,
    trace: Trace,
    stats: DriveStats,
    started_unix: float,
    wall_s: float,
    initial: dict[str, dict[str, Any]],
    replay: dict[str, Any],
) -> RunMeta:
    meta = replay_meta(
        run_id=run_id,
        core=pd.decode,
        config_path=config_path,
        trace=trace,
        stats=stats,
        started_unix=started_unix,
        wall_s=wall_s,
        initial=fleet_state(list(initial.values())),
        replay=replay,
    )
    assert meta.pool is not None, "a replay's meta states its pool"
    pool = meta.pool.model_copy(update={"num_blocks": sum(s.core.memory.num_blocks for s in pd.sides.values())})
    final = {
        **fleet_state([_final(pd, role) for role in ROLES]),
        "pd": pd.counts(),
    }
    target = {**meta.target, "kind": PD_TARGET}
    return meta.model_copy(
        update={
            "config_digest": config_digest(config),
            "config": redacted(config),
            "pool": pool,
            "final": final,
            "target": target,
            "signals": meta.signals.model_copy(update={"tenant_samples": False}),
        }
    )
