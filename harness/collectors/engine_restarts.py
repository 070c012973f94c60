"""Engine restarts seen from outside: the process start time it exports, and its /health.

    watch = RestartWatch(base_url, api_key=key)
    watch.observe(scrape, t_s)    # every scrape: process_start_time_seconds (vLLM's /metrics)
    watch.poll_health(t_s)        # its own tick, HEALTH_INTERVAL_S: GET /health
    watch.finish(t_s)             # the run's end: an outage not over yet is recorded as such
    rows = watch.take_events()    # engine_restart event rows since the last call
    watch.status()                # meta.collectors["engine_restarts"]

An engine that runs out of GPU memory mid-run mostly dies (vLLM's engine core exits and its
server with it; a supervisor starts it again): the requests in flight end in connection errors
the client cannot tell from a network fault. From outside that shows as a new process start
time in /metrics, or as /health failing — no connection, or a 5xx — and answering again. A
slow /health (timeout) is not a failure: a busy CPU server answers late. Nothing before the
first healthy answer counts, so a server without the route is "not available", not down.
Each witness counts the restarts it saw; `no_oom` takes the larger count, since both may see
the same restart.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

from harness.collectors.prometheus import Scrape, bearer
from record.events import EventKind
from record.run_record import CollectorStatus

NAME = "engine_restarts"
"""Its key in meta.collectors (and gates.sources.Source.ENGINE_RESTARTS's value)."""
HEALTH_PATH = "/health"
HEALTH_INTERVAL_S = 1.0
HEALTH_TIMEOUT_S = 5.0
START_TIME_TOLERANCE_S = 1.0
"""A process start time that moves by more than this is another process."""


class RestartWatch:
    """Owns the last start time seen and the /health state. The two ticks call it from two
    threads, each touching its own fields (`observe`: the start time, `poll_health` and
    `finish`: the health state); the events they make pass under one lock."""

    def __init__(self, base_url: str, *, api_key: str = "", transport: httpx.BaseTransport | None = None) -> None:
        self.url = base_url.rstrip("/") + HEALTH_PATH
        self._client = httpx.Client(timeout=HEALTH_TIMEOUT_S, headers=bearer(api_key), transport=transport)
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._start_s: float | None = None
        self.num_start_changes = 0
        self.health_seen = False
        self.health_detail = "not polled"
        self.down_since_s: float | None = None
        self.num_outages = 0
        self.num_slow = 0

    def observe(self, scrape: Scrape, t_s: float) -> None:
        started = scrape.gauges.get("process_start_s")
        if started is None:
            return
        if self._start_s is not None and abs(started - self._start_s) > START_TIME_TOLERANCE_S:
            self.num_start_changes += 1
            self._event(t_s, "process_start_time")
        self._start_s = started

    def poll_health(self, t_s: float) -> None:
        try:
            resp = self._client.get(self.url)
        except httpx.TimeoutException:
            self.num_slow += 1
            return
        except httpx.HTTPError as err:
            self._down(t_s, type(err).__name__)
            return
        if resp.status_code >= 500:
            self._down(t_s, f"HTTP {resp.status_code}")
        elif resp.is_success:
            self.health_seen, self.health_detail = True, f"GET {HEALTH_PATH} every {HEALTH_INTERVAL_S:g} s"
            if self.down_since_s is not None:
                self._event(self.down_since_s, "health", latency_s=t_s - self.down_since_s)
                self.down_since_s = None
        elif not self.health_seen:
            self.health_detail = f"GET {HEALTH_PATH}: HTTP {resp.status_code}"

    def _down(self, t_s: float, why: str) -> None:
        if not self.health_seen:
            self.health_detail = f"GET {HEALTH_PATH}: {why}"
        elif self.down_since_s is None:
            self.down_since_s = t_s
            self.num_outages += 1

    def finish(self, t_s: float) -> None:
        """An outage still on at the run's end: the engine never came back (latency_s empty)."""
        if self.down_since_s is not None:
            self._event(self.down_since_s, "health")
            self.down_since_s = None

    def _event(self, t_s: float, reason: str, latency_s: float | None = None) -> None:
        row = {"t_s": t_s, "kind": EventKind.ENGINE_RESTART.value, "reason": reason, "latency_s": latency_s}
        with self._lock:
            self._events.append(row)

    def take_events(self) -> list[dict[str, Any]]:
        with self._lock:
            taken, self._events = self._events, []
        return taken

    def status(self) -> CollectorStatus:
        parts = []
        if self._start_s is not None:
            parts.append(f"process_start_time_seconds in /metrics ({self.num_start_changes} changes)")
        if self.health_seen:
            slow = f", {self.num_slow} slow answers" if self.num_slow else ""
            parts.append(f"{self.health_detail} ({self.num_outages} outages{slow})")
        if parts:
            return CollectorStatus(available=True, detail="; ".join(parts))
        return CollectorStatus(
            available=False,
            detail=f"no process_start_time_seconds in /metrics, and /health never answered ({self.health_detail})",
        )

    def close(self) -> None:
        self._client.close()
