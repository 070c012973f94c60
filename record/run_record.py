"""The run record: one directory per run, the contract between targets, gates and reports.

    <run_dir>/
      meta.json            RunMeta: config + digest, policy, scenarios, target, mode, pool,
                           watermarks, tenants, phases, signals, versions, hardware, final state
      requests.csv         client view, one row per request (REQUEST_COLUMNS)
      events.csv           engine event log (EVENT_COLUMNS; kinds in record.events)
      samples.csv          periodic usage samples (SAMPLE_COLUMNS)
      tenant_samples.csv   per-tenant live blocks at each sample (TENANT_SAMPLE_COLUMNS)
      replica_samples.csv  each replica's samples, behind a gateway (REPLICA_SAMPLE_COLUMNS)
      replicas.csv         each replica's pool before and after, and its run's counts (REPLICA_COLUMNS)
      verdict.json         written by gates
      report.html          written by reports

All times are seconds since `meta.started_unix` (live) or since the trace start (replay). Tables
are CSV with a header, so `pandas.read_csv` reads them and a diff shows them. A signal the target
could not provide is `false` in `meta.signals` and its table may be empty: gates that depend on
it say *not measurable*, never *passed*. The schema is versioned (`SCHEMA_VERSION`); a reader
refuses any other version instead of misreading it. docs/run_record.md documents every column.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from record.events import WORKER_EVENT_COLUMNS

SCHEMA_VERSION = 2  # 2: the events' `value` column became typed columns (deadline_s, usage, ...)

REQUEST_COLUMNS: tuple[str, ...] = (
    "request_id",
    "engine_request_id",
    "scenario",
    "phase",
    "tenant",
    "traffic_class",
    "session_id",
    "sent_s",
    "first_token_s",
    "done_s",
    "ttft_s",
    "e2e_s",
    "status",
    "http_status",
    "error_code",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "max_tokens",
    "streaming",
    "cancel_intended",
    "session_rebuilt",
    "max_tokens_clamped",
    "approximate",
    "worker",
    "intended_s",
    "load_worker",
)
"""status: ok | error | cancelled (an intended cancel) | timeout. error_code: the OpenAI error
`code` (kv_capacity, tenant_quota, queue_deadline, context_expired, context_length_exceeded,
worker_lost, ...) or a client-side code (connection_error, timeout, bad_response). worker: the
engine worker that served it. intended_s: when an open-loop request was meant to be sent (empty
for closed-loop users); its client lag is sent_s − intended_s. load_worker: the load generator's
process that sent it (`local`, or the locust worker `w0`, `w1`, ...; empty for the harness's own
baseline requests)."""

SAMPLE_COLUMNS: tuple[str, ...] = (
    "t_s",
    "num_blocks",
    "live_blocks",
    "retained_blocks",
    "pinned_blocks",
    "cached_blocks",
    "free_blocks",
    "usage",
    "num_running",
    "num_waiting",
    "num_swapped",
    "waiting_system",
    "waiting_interactive",
    "waiting_batch",
    "fragmentation",
    "level",
    "gpu_mem_used_bytes",
    "gpu_mem_total_bytes",
    "host_tier_blocks",
    "disk_tier_blocks",
    "source",
)

TENANT_SAMPLE_COLUMNS: tuple[str, ...] = ("t_s", "tenant", "live_blocks", "share", "cap", "source")
"""source: `engine` (the engine's own count of each tenant's live blocks: admin API, replay) or
`client_estimate` (ESTIMATED_SOURCE: the client's in-flight requests and their tokens, for a
target that knows no tenants; harness/collectors/tenant_estimate.py). Empty in older records:
the engine's."""

ENGINE_SOURCE = "engine"
ESTIMATED_SOURCE = "client_estimate"

RECORD_EVENT_COLUMNS: tuple[str, ...] = (*WORKER_EVENT_COLUMNS, "replica")
"""`replica`: the replica of a fleet an event was seen on from outside (`engine_restart`,
`log_match`); empty for the target itself and for the engine's own events (those name their
`worker`)."""

HIT_COUNTERS: tuple[str, ...] = ("prefix_cache_queries_tokens", "prefix_cache_hits_tokens")
"""Prefix-cache tokens looked up and hit, as a replica's sample carries them: its counters'
increase since the run began, at that tick (so the hits of any window are a difference)."""

REPLICA_SAMPLE_COLUMNS: tuple[str, ...] = ("replica", *SAMPLE_COLUMNS, *HIT_COUNTERS)
"""A fleet's samples, one row per replica per tick (all replicas read at the same tick, so rows
of one tick share `t_s`), with its prefix-cache counters so far (HIT_COUNTERS). A tick whose
scrape of a replica failed is a row of that replica with `source` MISSING_SOURCE and no
figures: the gap is in the table, not only in a note."""

MISSING_SOURCE = "missing"

POOL_STATE_KEYS: tuple[str, ...] = (
    "num_blocks",
    "live_blocks",
    "free_blocks",
    "cached_blocks",
    "retained_blocks",
    "pinned_blocks",
    "pending_blocks",
    "requests_in_engine",
    "usage",
)
"""The pool as `meta.initial` and `meta.final` give it (harness/sample_rows.py `pool_state`)."""

RUN_COUNTERS: tuple[str, ...] = (
    "prefix_cache_queries_tokens",
    "prefix_cache_hits_tokens",
    "prompt_tokens_computed",
    "num_preemptions",
)
"""A target's counters, as a replica's run changed them: the increase from the run's start to
its end, a counter reset (a restarted replica) counted from zero, never the total since start."""

KV_EVENT_COUNTS: tuple[str, ...] = (
    "kv_blocks_stored",
    "kv_blocks_removed",
    "kv_blocks_restored",
    "kv_all_cleared",
    "kv_batches_missed",
)
"""What a replica's KV cache events said over the run (harness/collectors/kv_events.py)."""

REPLICA_COLUMNS: tuple[str, ...] = (
    "replica",
    "url",
    "metrics_url",
    "kv_events",
    "log",
    "worker",
    "block_tokens",
    *(f"initial_{key}" for key in POOL_STATE_KEYS),
    *(f"final_{key}" for key in POOL_STATE_KEYS),
    *RUN_COUNTERS,
    *KV_EVENT_COUNTS,
    "prefix_cache_reset_after_drain",
    "num_samples",
    "num_samples_missed",
)
"""One row per replica of a fleet: where it was read, its pool before the run and after the
drain (`initial_*`, `final_*`: empty when its metrics did not say), its run's counters
(RUN_COUNTERS), its KV events (KV_EVENT_COUNTS), the leak check, and how many of its samples were
taken and missed. `worker`: the reference engine's worker index behind the replica (its events
name it), empty for any other engine."""

TABLES: dict[str, tuple[str, ...]] = {
    "requests": REQUEST_COLUMNS,
    "events": RECORD_EVENT_COLUMNS,
    "samples": SAMPLE_COLUMNS,
    "tenant_samples": TENANT_SAMPLE_COLUMNS,
    "replica_samples": REPLICA_SAMPLE_COLUMNS,
    "replicas": REPLICA_COLUMNS,
}


class Signals(BaseModel):
    """Which signals the target provided. False means 'absent', never 'zero'."""

    model_config = ConfigDict(extra="forbid")
    client_requests: bool = True
    engine_events: bool = False
    engine_samples: bool = False
    tenant_samples: bool = False
    gpu_memory: bool = False
    prometheus: bool = False
    worker_chaos: bool = False


class CollectorStatus(BaseModel):
    """Whether one collector of a live run got its data, and if not, why (`meta.collectors`)."""

    model_config = ConfigDict(extra="forbid")
    available: bool
    detail: str = ""


class Phase(BaseModel):
    """A named time window: `baseline` (unloaded probe), `load` (the pressure window), `cooldown`."""

    model_config = ConfigDict(extra="forbid")
    name: str
    start_s: float
    end_s: float


class PoolInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    num_blocks: int
    block_tokens: int
    bytes_per_block: float
    model: str
    gpu: str


class TenantInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    traffic_class: str
    max_kv_share: float


RUNGS: tuple[str, ...] = ("warn", "admission", "evict", "pause_batch", "preempt", "reject")
"""The watermark ladder, lowest rung first: the names `meta.watermarks` and the engine's
`watermark` events use (reference_engine/core/watermarks.py says what each one switches on)."""


class RungReached(BaseModel):
    """How one rung of the ladder was reached during a run."""

    model_config = ConfigDict(extra="forbid")
    rung: str
    usage: float = Field(description="the rung, as a fraction of the pool")
    first_s: float | None = Field(description="when live usage first reached it; None: never")
    entries: int = Field(description="times usage rose to it from below")
    held_s: float = Field(description="total time usage stayed at or above it")


class Pressure(BaseModel):
    """How hard the run pressed on the KV cache, and what the engine did about it.

    `source`: `engine` (the engine's `watermark` events: every level change, at step ends),
    `samples` (live usage of the periodic samples against `meta.watermarks`: a target without
    events, at the sample interval), `target` (a server without a ladder: no rungs, only what its
    telemetry shows it did, in `decisions`), or `none` (nothing is known). `decisions` counts
    the engine's answers to pressure by kind (record/pressure.py lists them)."""

    model_config = ConfigDict(extra="forbid")
    source: str
    peak_usage: float | None = None
    rungs: list[RungReached] = []
    decisions: dict[str, int] = {}
    replicas: dict[str, list[RungReached]] = Field(
        default_factory=dict,
        description="each engine's own rungs when the events name more than one (a fleet, a P/D pair); "
        "then `rungs` holds, for each rung, the replica that reached it last or never",
    )

    def rung(self, name: str) -> RungReached | None:
        return next((r for r in self.rungs if r.rung == name), None)

    def reached(self, name: str) -> bool:
        rung = self.rung(name)
        return rung is not None and rung.first_s is not None


class PrefixReuse(BaseModel):
    """What the workload could reuse at all: the prompt tokens an infinite prefix cache with the
    target's block size would have served from cache, as a share of all prompt tokens (the bound
    no cache of any size passes), and the longest prompt prefix a request shares with an earlier
    one (shorter than one block: nothing can hit). harness/replay/reuse_bound.py computes it."""

    model_config = ConfigDict(extra="forbid")
    bound: float = Field(description="hit tokens / prompt tokens of an infinite cache at block_tokens")
    block_tokens: int
    longest_shared_tokens: int
    num_requests: int
    source: str = Field(description="the workload it was computed from (a trace file)")


class RunMeta(BaseModel):
    model_config = ConfigDict(extra="allow")
    schema_version: int = SCHEMA_VERSION
    run_id: str
    mode: str = Field(description="live | replay")
    started_unix: float
    duration_s: float = 0.0
    policy: str = ""
    config_path: str = ""
    config_digest: str = ""
    config: dict[str, Any] = {}
    scenarios: list[str] = []
    target: dict[str, Any] = {}
    pool: PoolInfo | None = None
    watermarks: dict[str, float] = {}
    tenants: dict[str, TenantInfo] = {}
    phases: list[Phase] = []
    signals: Signals = Signals()
    versions: dict[str, str] = {}
    hardware: dict[str, Any] = {}
    initial: dict[str, Any] = Field(
        default_factory=dict, description="the pool before the first request, as final has it"
    )
    final: dict[str, Any] = Field(
        default_factory=dict, description="state after the run drained: live_blocks, reservations, ..."
    )
    notes: list[str] = []
    pressure: Pressure | None = Field(None, description="rungs reached and decisions taken (record/pressure.py)")
    collectors: dict[str, CollectorStatus] = Field(
        default_factory=dict, description="each telemetry collector of a live run: available, or why not"
    )
    probes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="probes sent before the load (cache_salt: prefix-cache isolation)"
    )
    replica_collectors: dict[str, dict[str, CollectorStatus]] = Field(
        default_factory=dict, description="behind a gateway: each replica's collectors, as `collectors` for the target"
    )
    prefix_reuse: PrefixReuse | None = Field(None, description="what the workload could reuse (a trace's bound)")

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    @property
    def ended_early(self) -> str | None:
        """The note saying the run did not finish (interrupted, or failed mid-way), if one does:
        such a record is partial and may not pass (harness/judge.py)."""
        return next((n for n in self.notes if n.startswith(ENDED_EARLY)), None)

    @property
    def harness_error(self) -> str | None:
        """The note saying the harness, not the target, failed the run (an open-loop client that
        lagged beyond its bound): such a record is kept and never judged (harness/judge.py)."""
        return next((n for n in self.notes if n.startswith(HARNESS_ERROR)), None)


ENDED_EARLY = "run ended early"
HARNESS_ERROR = "harness error"


class RecordError(Exception):
    """A run directory that is missing, incomplete or of an unknown schema version."""


class RunRecordWriter:
    """Writes a run record incrementally: rows are appended as they arrive (CSV, flushed)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._files = {}
        self._writers = {}
        for table, columns in TABLES.items():
            f = open(self.dir / f"{table}.csv", "w", newline="")
            w = csv.writer(f)
            w.writerow(columns)
            self._files[table], self._writers[table] = f, w

    def append(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Rows as mappings; keys outside the table's columns are ignored, missing ones empty."""
        columns = TABLES[table]
        rows = rows if isinstance(rows, list) else list(rows)
        try:  # rows that have every column (events, samples): one C call per row
            values = list(map(itemgetter(*columns), rows))
        except KeyError:
            values = [[row.get(c) for c in columns] for row in rows]
        self._writers[table].writerows(values)
        self._files[table].flush()

    def write_meta(self, meta: RunMeta) -> None:
        (self.dir / "meta.json").write_text(meta.model_dump_json(indent=2))

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __enter__(self) -> RunRecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_DTYPES = {
    "requests": {
        "request_id": str,
        "engine_request_id": str,
        "scenario": str,
        "phase": str,
        "tenant": str,
        "traffic_class": str,
        "session_id": str,
        "status": str,
        "error_code": str,
        "finish_reason": str,
        "worker": str,
        "load_worker": str,
    },
    "events": {
        "kind": str,
        "request_id": str,
        "tenant": str,
        "traffic_class": str,
        "reason": str,
        "mode": str,
        "client_request_id": str,
        "worker": str,
        "replica": str,
    },
    "samples": {"level": str, "source": str},
    "tenant_samples": {"tenant": str, "source": str},
    "replica_samples": {"replica": str, "level": str, "source": str},
    "replicas": {"replica": str, "url": str, "metrics_url": str, "kv_events": str, "log": str, "worker": str},
}


@dataclass
class RunRecord:
    """A loaded run record: metadata plus one DataFrame per table."""

    dir: Path
    meta: RunMeta
    requests: pd.DataFrame
    events: pd.DataFrame
    samples: pd.DataFrame
    tenant_samples: pd.DataFrame
    replica_samples: pd.DataFrame
    replicas: pd.DataFrame

    @classmethod
    def load(cls, run_dir: str | Path) -> RunRecord:
        d = Path(run_dir)
        meta_path = d / "meta.json"
        if not meta_path.exists():
            raise RecordError(f"{d}: not a run record (no meta.json)")
        raw = json.loads(meta_path.read_text())
        version = raw.get("schema_version", 0)
        if version > SCHEMA_VERSION:
            raise RecordError(
                f"{d}: run record schema {version} is newer than this kvgate ({SCHEMA_VERSION}); "
                f"upgrade kvgate to read it"
            )
        if version < SCHEMA_VERSION:
            raise RecordError(
                f"{d}: run record schema {version} is older than this kvgate's ({SCHEMA_VERSION}); "
                f"its event columns differ: run it again, or judge it with the kvgate that wrote it"
            )
        meta = RunMeta.model_validate(raw)
        tables = {name: _read_table(d / f"{name}.csv", columns, _DTYPES[name]) for name, columns in TABLES.items()}
        return cls(dir=d, meta=meta, **tables)

    def verdict_path(self) -> Path:
        return self.dir / "verdict.json"

    @staticmethod
    def table(run_dir: str | Path, name: str) -> pd.DataFrame:
        """One table of a run directory, read as `load` reads it: of a record still being
        written, the rows flushed so far."""
        return _read_table(Path(run_dir) / f"{name}.csv", TABLES[name], _DTYPES[name])


def _read_table(path: Path, columns: tuple[str, ...], dtypes: dict) -> pd.DataFrame:
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, float)) for c in columns})
    df = pd.read_csv(path, dtype={k: v for k, v in dtypes.items()}, keep_default_na=True)
    if df.empty:  # a header without rows reads as all-object columns; keep numbers numeric
        return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, float)) for c in columns})
    for c in columns:
        if c not in df.columns:
            df[c] = pd.Series(dtype=dtypes.get(c, float))
    return df
