"""All collectors of one live run: background threads writing into the run record.

    collectors = LiveCollectors(CollectorSettings(base_url=..., metrics_url=...), writer, started_unix)
    collectors.start()              # events poller + sampler threads
    initial = collectors.initial_state()  # the pool before any request
    ...                             # baseline, load
    collectors.wait_drained(30)     # cooldown: until the engine holds no request
    final = collectors.final_state()
    collectors.stop(); meta.signals = collectors.signals()

What exists depends on the target, and `signals()` says exactly what was collected: the admin
API (the reference engine) gives engine events, engine samples and tenant samples; a /metrics
URL gives Prometheus samples (written as samples only when the engine gives none, so a table
never mixes two views of one pool); NVML gives GPU memory, added to each sample. Appends to the
writer happen under one lock: the two threads never interleave rows.

A target without the admin API gets its KV telemetry from outside (target_telemetry.py): the
prefix-cache reset before the load, llama.cpp's /slots, vLLM's KV events,
the leak check after the drain; with `fast_poll` (a cancel storm) its metrics are polled every
`FAST_POLL_S`, so a release shows within tens of milliseconds. Its OOM witnesses come from
outside too: restarts (engine_restarts.py: the scraped process start time, /health on its own
tick) and, with `target_log`, the server's log (target_log.py); both write `engine_restart`
and `log_match` events, numbered apart from any engine's. `statuses()` is meta.collectors.

Behind a gateway (`replicas`: `kvgate run --replica`, or the reference engine's workers) each
replica is read on its own, all at one tick (fleet.py): its rows go to replica_samples.csv, its
restarts and log lines to events.csv under its name, its pool and counters to replicas.csv
(`replica_rows()`), its collectors to meta.replica_collectors (`replica_statuses()`). Without
the admin API the fleet is the target: its samples, meta.initial and meta.final are the
replicas' summed, and the gateway itself is not read (it holds no KV).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.collectors import engine_restarts, target_log
from harness.collectors.admin import AdminApi, AdminUnavailable
from harness.collectors.engine_restarts import HEALTH_INTERVAL_S, RestartWatch
from harness.collectors.events import EventCollector
from harness.collectors.fleet import FleetCollectors
from harness.collectors.gpu import GpuSampler
from harness.collectors.llamacpp_slots import DEFAULT_LAYOUT, KvLayout
from harness.collectors.periodic import Periodic
from harness.collectors.prometheus import COUNTERS, PrometheusScraper, Scrape, ScrapeError
from harness.collectors.replica_spec import ReplicaSpec
from harness.collectors.snapshot import in_flight, pool_state, sample_row, tenant_rows
from harness.collectors.target_log import LogTail
from harness.collectors.target_telemetry import TargetTelemetry
from harness.collectors.tenant_estimate import PoolCapacity, scraped_pool
from record.run_record import CollectorStatus, RunRecordWriter, Signals
from reference_engine.config import DEV_ADMIN_KEY


@dataclass(frozen=True, kw_only=True)
class CollectorSettings:
    base_url: str
    metrics_url: str = ""
    admin_key: str = DEV_ADMIN_KEY
    sample_interval_s: float = 0.5
    events_interval_s: float = 0.5
    gpu_index: int = 0
    api_key: str = ""  # the target's (a tenant's) key: /metrics, /slots and the reset send it
    fast_poll: bool = False
    kv_events_endpoint: str = ""
    llamacpp_kv: KvLayout = DEFAULT_LAYOUT  # how a llama.cpp target laid out its cache (llamacpp_slots.py)
    target_log: Path | None = None  # the server's log, tailed for OOM lines (kvgate run --target-log)
    replicas: tuple[ReplicaSpec, ...] = ()  # behind a gateway: each replica, read on its own (fleet.py)


FAST_POLL_S = 0.05
"""The metrics poll interval of an outside target during a cancel storm: release latency is
bounded to within one interval (gates/held_requests.py)."""
LOG_TAIL_S = 0.5
"""How often the target's log is read: an OOM line's time is known to within this."""


class LiveCollectors:
    """Owns the collectors and what they found. The `*_ok` flags only go from False to True."""

    def __init__(self, settings: CollectorSettings, writer: RunRecordWriter, started_unix: float) -> None:
        self.settings = settings
        self.writer = writer
        self.started_unix = started_unix
        self.notes: list[str] = []
        self.engine_config: dict[str, Any] | None = None
        self.last_snapshot: dict[str, Any] | None = None
        self.events_ok = self.samples_ok = self.prometheus_ok = self.gpu_ok = False
        self._lock = threading.Lock()
        self._threads: list[Periodic] = []
        self._failures: Counter[str] = Counter()
        self._last_failure: dict[str, str] = {}
        self.admin: AdminApi | None = AdminApi(settings.base_url, settings.admin_key)
        try:
            self.engine_config = self.admin.config()
        except AdminUnavailable as err:
            self.notes.append(f"no engine admin API ({err}): engine events and samples are absent")
            self.admin.close()
            self.admin = None
        self.events = EventCollector(self.admin, started_unix) if self.admin else None
        self.caps: dict[str, float] = {
            name: float(t["max_kv_share"])
            for name, t in (self.engine_config or {}).get("config", {}).get("tenants", {}).items()
        }
        self.scraper = (
            PrometheusScraper(settings.metrics_url, api_key=settings.api_key) if settings.metrics_url else None
        )
        # A reference engine's workers want its admin key on /metrics; any other replica the target's.
        self.fleet = (
            FleetCollectors(
                settings.replicas,
                api_key=settings.admin_key if self.admin is not None else settings.api_key,
                llamacpp_kv=settings.llamacpp_kv,
            )
            if settings.replicas
            else None
        )
        self.outside = (
            None
            if self.admin is not None or self.fleet is not None
            else TargetTelemetry(
                settings.base_url,
                self.scraper,
                api_key=settings.api_key,
                kv_events_endpoint=settings.kv_events_endpoint,
                llamacpp_kv=settings.llamacpp_kv,
            )
        )
        self.restarts = RestartWatch(settings.base_url, api_key=settings.api_key) if self.outside is not None else None
        self.log_tail = LogTail(settings.target_log) if settings.target_log is not None else None
        self._outside_seq = itertools.count()
        self.gpu = GpuSampler(settings.gpu_index)
        if not self.gpu.available:
            self.notes.append(f"GPU memory unavailable: {self.gpu.reason}")

    def start(self) -> None:
        if self.events is not None:
            self._threads.append(Periodic("events", self.settings.events_interval_s, self.poll_events).start())
        interval_s = self.settings.sample_interval_s
        if self.outside is not None:
            self.outside.start()
            if self.settings.fast_poll and self.scraper is not None:
                interval_s = min(interval_s, FAST_POLL_S)
        if self.fleet is not None:
            self.fleet.start()
            if self.settings.fast_poll:
                interval_s = min(interval_s, FAST_POLL_S)
        self._threads.append(Periodic("samples", interval_s, self.sample).start())
        if self.restarts is not None or self.fleet is not None:
            self._threads.append(Periodic("health", HEALTH_INTERVAL_S, self.poll_health).start())
        if self.log_tail is not None or (self.fleet is not None and self.fleet.has_logs):
            self._threads.append(Periodic("target_log", LOG_TAIL_S, self.poll_log).start())

    # ------------------------------------------------------------ the ticks
    def poll_events(self) -> None:
        assert self.events is not None
        rows = self.events.poll()
        self.events_ok = True
        self._append("events", rows)

    def sample(self) -> None:
        """One tick: the engine's snapshot, else a scrape; GPU memory added to the row."""
        now_s = time.time() - self.started_unix
        row: dict[str, Any] | None = None
        tenants: list[dict[str, Any]] = []
        if self.admin is not None:
            try:
                snap = self.admin.snapshot()
            except AdminUnavailable as err:
                self._failed("snapshot", err)
            else:
                self.last_snapshot, self.samples_ok = snap, True
                row = sample_row(snap, self.started_unix)
                tenants = tenant_rows(snap, row["t_s"], self.caps)
        scrape = self._scrape(now_s)
        if row is None and scrape is not None:
            row = scrape.sample_row(now_s)
        if self.fleet is not None:
            tick = self.fleet.sample(now_s)
            self._append("replica_samples", tick.replica_rows)
            self._append_outside(tick.events)
            if row is None and tick.fleet_row is not None:
                row, self.prometheus_ok = tick.fleet_row, True
        gpu = self.gpu.sample()
        if gpu is not None:
            self.gpu_ok = True
            row = row or {"t_s": now_s, "source": "gpu"}
            row["gpu_mem_used_bytes"], row["gpu_mem_total_bytes"] = gpu
        if row is not None:
            self._append("samples", [row])
        if tenants and self.caps:
            self._append("tenant_samples", tenants)

    def poll_health(self) -> None:
        now_s = time.time() - self.started_unix
        if self.restarts is not None:
            self.restarts.poll_health(now_s)
            self._append_outside(self.restarts.take_events())
        if self.fleet is not None:
            self._append_outside(self.fleet.poll_health(now_s))

    def poll_log(self) -> None:
        now_s = time.time() - self.started_unix
        if self.log_tail is not None:
            self._append_outside(self.log_tail.poll(now_s))
        if self.fleet is not None:
            self._append_outside(self.fleet.poll_log(now_s))

    def _scrape(self, now_s: float) -> Scrape | None:
        if self.scraper is None:
            return None
        try:
            scrape = self.scraper.scrape()
        except ScrapeError as err:
            self._failed("scrape", err)
            return None
        self.prometheus_ok = self.prometheus_ok or bool(scrape.dialect)
        if self.restarts is not None:
            self.restarts.observe(scrape, now_s)
            self._append_outside(self.restarts.take_events())
        return scrape if self.outside is None else self.outside.complete(scrape)

    def _failed(self, source: str, err: Exception) -> None:
        self._failures[source] += 1
        self._last_failure[source] = str(err)

    def _append(self, table: str, rows: list[dict[str, Any]]) -> None:
        with self._lock:
            self.writer.append(table, rows)

    def _append_outside(self, rows: list[dict[str, Any]]) -> None:
        """Events seen from outside the engine, numbered in the order they are written."""
        if rows:
            with self._lock:
                self.writer.append("events", [{**row, "seq": next(self._outside_seq)} for row in rows])

    # ------------------------------------------------------------ run phases
    def in_flight(self) -> int | None:
        """Requests the target still holds, from the last sample; None if it cannot say."""
        if self.last_snapshot is not None:
            return in_flight(self.last_snapshot)
        if self.fleet is not None:
            return self.fleet.in_flight()
        last = self.scraper.last if self.scraper is not None else None
        if last is not None and "num_running" in last.gauges:
            return int(last.gauges["num_running"] + last.gauges.get("num_waiting", 0))
        return None

    def wait_drained(self, timeout_s: float) -> bool:
        """Block until the target holds no request (False: it still did after `timeout_s`, or cannot say)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.in_flight() == 0:
                return True
            time.sleep(self.settings.sample_interval_s)
        return self.in_flight() == 0

    def stop(self) -> None:
        """Stop the threads after one last tick each (the drained state is in the record)."""
        for thread in self._threads:
            thread.stop()
            if thread.num_errors:
                self.notes.append(
                    f"collector {thread.name}: {thread.num_errors} of {thread.num_calls} ticks failed "
                    f"(last: {thread.last_error})"
                )
        self._threads.clear()
        if self.restarts is not None:
            self.restarts.finish(time.time() - self.started_unix)
            self._append_outside(self.restarts.take_events())
        if self.fleet is not None:
            self._append_outside(self.fleet.finish(time.time() - self.started_unix))
        for source, num in self._failures.items():
            self.notes.append(f"{source}: {num} failed (last: {self._last_failure[source]})")
        if self.events is not None and self.events.num_missed:
            self.notes.append(f"{self.events.num_missed} engine events left the engine's ring before they were read")

    def _snapshot(self, which: str) -> dict[str, Any] | None:
        """The admin API's snapshot; None without one, or when it fails (noted, naming `which`)."""
        if self.admin is None:
            return None
        try:
            return self.admin.snapshot()
        except AdminUnavailable as err:
            self.notes.append(f"{which} snapshot failed: {err}")
            return None

    def initial_state(self) -> dict[str, Any]:
        """meta.initial: the pool before any request (harness/sample_rows.py `pool_state`, as
        meta.final has it); from outside (target_telemetry.py) without an admin API, after the
        prefix-cache reset."""
        if self.outside is not None:
            return self.outside.before_load()
        fleet = self.fleet.before_load() if self.fleet is not None else {}
        snap = self._snapshot("initial")
        if self.admin is None:
            return fleet
        return {} if snap is None else pool_state(snap)

    def final_state(self) -> dict[str, Any]:
        """meta.final: the engine after the drain (admin API) and the run's counters (/metrics).
        Keys the target cannot give are absent, never zero."""
        final: dict[str, Any] = {}
        if self.scraper is not None and self.scraper.last is not None:
            final.update(self.scraper.last.counters)
        if self.outside is not None:
            final.update(self.outside.after_drain())
        if self.fleet is not None:  # its counters are the run's increase, restarts counted (replica.py)
            fleet = self.fleet.after_drain()
            final.update(fleet if self.admin is None else {k: v for k, v in fleet.items() if k in COUNTERS})
        snap = self._snapshot("final")
        if snap is None or self.admin is None:
            return final
        final.update(pool_state(snap))
        final["reservations_outstanding"] = final["pending_blocks"] + int(snap.get("num_reservations", 0))
        if final["requests_in_engine"] == 0:  # blocks held by no request and no retained state
            final["orphan_blocks"] = max(0, final["live_blocks"] - final["retained_blocks"])
        if snap.get("unavailable"):
            final["workers_unavailable"] = snap["unavailable"]
        final.update({key: snap[key] for key in ("tiers", "tier_loads_in_flight", "pd") if key in snap})
        try:
            ledger = self.admin.ledger()
        except AdminUnavailable as err:
            self.notes.append(f"final ledger failed: {err}")
            return final
        if "sessions" in ledger:  # one engine; a router's ledger is its reservations + each worker's
            final["ledger_requests"], final["ledger_sessions"] = len(ledger["requests"]), len(ledger["sessions"])
        else:
            final["ledger_reservations"] = len(ledger.get("reservations", []))
        return final

    def signals(self) -> Signals:
        return Signals(
            client_requests=True,
            engine_events=self.events_ok,
            engine_samples=self.samples_ok,
            tenant_samples=self.samples_ok and bool(self.caps),
            gpu_memory=self.gpu_ok,
            prometheus=self.prometheus_ok,
            worker_chaos=bool(self.events and self.events.num_by_kind.get("worker_died")),
        )

    def statuses(self) -> dict[str, CollectorStatus]:
        """meta.collectors: every source of this run, available or why not."""
        out = {
            "admin_api": CollectorStatus(
                available=self.admin is not None,
                detail="engine events, samples, ledger"
                if self.admin
                else "no kvgate admin API: events and per-request engine state are absent",
            ),
            "prometheus": CollectorStatus(
                available=self.prometheus_ok,
                detail=self.settings.metrics_url
                or ("the replicas' metrics, summed at each tick" if self.fleet is not None else "no metrics URL"),
            ),
            "gpu_memory": CollectorStatus(available=self.gpu_ok, detail=self.gpu.name or self.gpu.reason),
        }
        if self.outside is not None:
            out.update(self.outside.statuses())
        if self.fleet is not None and self.admin is None:
            out.update({k: v for k, v in self.fleet.statuses().items() if k != "prometheus"})
        if self.restarts is not None:
            out[engine_restarts.NAME] = self.restarts.status()
        if self.log_tail is not None:
            out[target_log.NAME] = self.log_tail.status()
        elif self.outside is not None:
            out[target_log.NAME] = CollectorStatus(
                available=False, detail="no --target-log FILE given (the server's log, tailed for OOM lines)"
            )
        return out

    def replica_rows(self) -> list[dict[str, Any]]:
        """replicas.csv: each replica's pool before and after, and its run's counts."""
        return self.fleet.rows() if self.fleet is not None else []

    def replica_statuses(self) -> dict[str, dict[str, CollectorStatus]]:
        """meta.replica_collectors."""
        return self.fleet.replica_statuses() if self.fleet is not None else {}

    def stated_pool(self) -> PoolCapacity | None:
        """The pool the target's metrics state (a fleet: its replicas' together), or None."""
        if self.fleet is not None:
            return self.fleet.stated_pool()
        return scraped_pool(self.scraper.last if self.scraper is not None else None)

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.close()
        if self.restarts is not None:
            self.restarts.close()
        if self.log_tail is not None:
            self.log_tail.close()
        if self.outside is not None:
            self.outside.close()
        if self.admin is not None:
            self.admin.close()
        if self.scraper is not None:
            self.scraper.close()
        self.gpu.close()
