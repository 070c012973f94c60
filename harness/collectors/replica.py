"""One replica of a fleet, read from outside as a single target is: metrics, KV events, restarts, log.

    replica = ReplicaCollectors(spec, api_key=key)
    replica.start()                        # its KV event subscriber
    reading = replica.read(t_s)            # one scrape, and the restart it showed
    row = replica.tick_row(t_s, reading)   # its replica_samples row (MISSING_SOURCE: no reading in time)
    events = replica.poll_health(t_s)      # its /health; events = replica.poll_log(t_s): its log
    initial = replica.before_load()        # reset, pool state; its counters start counting here
    final = replica.after_drain()          # leak check, pool state, KV event counts, the run's counters
    replica.row()                          # its replicas.csv row; replica.statuses(): its collectors

The collectors are the single target's (target_telemetry.py, engine_restarts.py, target_log.py);
what a replica adds is its name on every row and event, and counters read as the run's
increase: a counter that goes down between two scrapes was reset (the replica restarted) and
counts from zero again, as Prometheus' `increase()` reads it, so a replica killed and restarted
mid-run still says how many prefix hits it served in the run, never its totals since start.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.collectors import engine_restarts, target_log
from harness.collectors.engine_restarts import RestartWatch
from harness.collectors.llamacpp_slots import DEFAULT_LAYOUT, KvLayout
from harness.collectors.prometheus import COUNTERS, PrometheusScraper, Scrape, ScrapeError
from harness.collectors.replica_spec import ReplicaSpec
from harness.collectors.target_log import LogTail
from harness.collectors.target_telemetry import TargetTelemetry
from record.run_record import (
    HIT_COUNTERS,
    KV_EVENT_COUNTS,
    MISSING_SOURCE,
    POOL_STATE_KEYS,
    RUN_COUNTERS,
    CollectorStatus,
)


class CounterIncrease:
    """Each counter's increase since `rebase`, from every value seen (module docstring). Both
    the sample tick and the run's phases feed it, under one lock; O(counters) per call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self.increase: dict[str, float] = {}

    def rebase(self, counters: Mapping[str, float]) -> None:
        """Count from these values on (the run's start); a counter first seen later counts from
        its first value."""
        with self._lock:
            self._last = {k: float(v) for k, v in counters.items()}
            self.increase = {k: 0.0 for k in counters}

    def now(self, names: Sequence[str]) -> dict[str, float]:
        """The increase so far of each of `names` the target exports."""
        with self._lock:
            return {name: self.increase[name] for name in names if name in self.increase}

    def observe(self, counters: Mapping[str, float]) -> None:
        with self._lock:
            for key, value in counters.items():
                last = self._last.get(key)
                step = 0.0 if last is None else value - last if value >= last else value
                self.increase[key] = self.increase.get(key, 0.0) + step
                self._last[key] = float(value)


@dataclass(frozen=True)
class Reading:
    """One scrape of a replica: the scrape (None: it failed, `error` says why) and the events
    (a changed process start time) it showed."""

    scrape: Scrape | None
    error: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)


class ReplicaCollectors:
    """Owns one replica's collectors; `num_samples` and `num_missed` only grow."""

    def __init__(self, spec: ReplicaSpec, *, api_key: str = "", llamacpp_kv: KvLayout = DEFAULT_LAYOUT) -> None:
        self.spec = spec
        self.scraper = PrometheusScraper(spec.metrics_url, api_key=api_key) if spec.metrics_url else None
        self.telemetry = TargetTelemetry(
            spec.url, self.scraper, api_key=api_key, kv_events_endpoint=spec.kv_events, llamacpp_kv=llamacpp_kv
        )
        self.restarts = RestartWatch(spec.url, api_key=api_key)
        self.log_tail = LogTail(spec.log) if spec.log is not None else None
        self.counters = CounterIncrease()
        self.initial: dict[str, Any] = {}
        self.final: dict[str, Any] = {}
        self.last: Scrape | None = None  # its latest scrape, None once one failed
        self.stated: Scrape | None = None  # its latest scrape that answered (the pool it states)
        self.num_samples = self.num_missed = 0
        self.last_error = ""

    def start(self) -> None:
        self.telemetry.start()

    def read(self, t_s: float) -> Reading:
        """One scrape (its counters and start time are taken in whenever it answers)."""
        if self.scraper is None:
            return Reading(None, "no metrics URL")
        try:
            scrape = self.scraper.scrape()
        except ScrapeError as err:
            self.last = None
            return Reading(None, str(err))
        self.restarts.observe(scrape, t_s)
        scrape = self.telemetry.complete(scrape)
        self.counters.observe(scrape.counters)
        self.last = self.stated = scrape
        return Reading(scrape, "", self._named(self.restarts.take_events()))

    def tick_row(self, t_s: float, reading: Reading | None, why: str = "") -> dict[str, Any] | None:
        """Its row of the tick at `t_s`: the reading's figures, or a MISSING_SOURCE row when there
        is none (`why`: it is still answering an earlier tick); None when its metrics have no usage."""
        if reading is None or reading.scrape is None:
            if self.scraper is None:
                return None
            self.num_missed += 1
            self.last_error = reading.error if reading is not None else why
            return {"t_s": t_s, "replica": self.spec.name, "source": MISSING_SOURCE}
        row = reading.scrape.sample_row(t_s)
        if row is None:
            return None
        self.num_samples += 1
        return {**row, **self.counters.now(HIT_COUNTERS), "replica": self.spec.name}

    def poll_health(self, t_s: float) -> list[dict[str, Any]]:
        self.restarts.poll_health(t_s)
        return self._named(self.restarts.take_events())

    def poll_log(self, t_s: float) -> list[dict[str, Any]]:
        return self._named(self.log_tail.poll(t_s)) if self.log_tail is not None else []

    def finish(self, t_s: float) -> list[dict[str, Any]]:
        """The run's end: an outage not over yet is recorded as such."""
        self.restarts.finish(t_s)
        return self._named(self.restarts.take_events())

    def _named(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**row, "replica": self.spec.name} for row in rows]

    def before_load(self) -> dict[str, Any]:
        """Its pool as the run begins (after the prefix-cache reset); its counters count from here
        (so meta.initial of a replica holds no counter: meta.final holds the run's increase)."""
        state = self.telemetry.before_load()
        self.counters.rebase({k: v for k, v in state.items() if k in COUNTERS})
        self.initial = {k: v for k, v in state.items() if k not in COUNTERS}
        return self.initial

    def after_drain(self) -> dict[str, Any]:
        """Its pool after the drain, its KV event counts and the run's counters (the increase)."""
        state = self.telemetry.after_drain()
        self.counters.observe({k: v for k, v in state.items() if k in COUNTERS})
        self.final = {k: v for k, v in state.items() if k not in COUNTERS} | self.counters.increase
        return self.final

    def row(self) -> dict[str, Any]:
        """Its replicas.csv row (record/run_record.py REPLICA_COLUMNS)."""
        return {
            "replica": self.spec.name,
            "url": self.spec.url,
            "metrics_url": self.spec.metrics_url,
            "kv_events": self.spec.kv_events,
            "log": str(self.spec.log or ""),
            "worker": self.spec.worker,
            "block_tokens": self.stated.info.get("block_tokens") if self.stated is not None else None,
            **{f"initial_{k}": self.initial.get(k) for k in POOL_STATE_KEYS},
            **{f"final_{k}": self.final.get(k) for k in POOL_STATE_KEYS},
            **{k: self.final.get(k) for k in (*RUN_COUNTERS, *KV_EVENT_COUNTS, "prefix_cache_reset_after_drain")},
            "num_samples": self.num_samples,
            "num_samples_missed": self.num_missed,
        }

    def statuses(self) -> dict[str, CollectorStatus]:
        """Its meta.replica_collectors entry: each source, available or why not."""
        missed = f"; {self.num_missed} scrapes failed (last: {self.last_error})" if self.num_missed else ""
        out = {
            "prometheus": CollectorStatus(
                available=self.num_samples > 0,
                detail=f"{self.spec.metrics_url}: {self.num_samples} samples{missed}"
                if self.spec.metrics_url
                else "no metrics URL (--replica URL,metrics=...)",
            ),
            **self.telemetry.statuses(),
            engine_restarts.NAME: self.restarts.status(),
        }
        if self.log_tail is not None:
            out[target_log.NAME] = self.log_tail.status()
        else:
            out[target_log.NAME] = CollectorStatus(available=False, detail="no log given (--replica URL,log=FILE)")
        return out

    def close(self) -> None:
        self.restarts.close()
        if self.log_tail is not None:
            self.log_tail.close()
        self.telemetry.close()
        if self.scraper is not None:
            self.scraper.close()
