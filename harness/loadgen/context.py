"""What one locust process's users and listeners share: its `ScenarioContext`.

One context per locust `Environment` (`context_of`), made from the run's settings when first
asked for. The listeners (plugin.py, roll_call.py, open_loop_users.py) keep the process's state in
it; the users (users.py) draw request ids, seeds and tenants from it and hand it their outcomes.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import httpx
from locust.env import Environment
from locust.runners import Runner

from harness.loadgen.load_workers import LoadWorkers, write_load_json
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.request_log import RequestLog
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant, TenantSet, parse_tenants
from harness.loadgen.watcher import Watcher

log = logging.getLogger("kvgate.scenarios")

OUTCOMES_MESSAGE = "kvgate_outcomes"
FALLBACK_MODEL = "default"


@dataclass(eq=False)
class ScenarioContext:
    """What the users of one locust process share. Only the listeners call `configure` and set
    `model`, `log`, `roll`, `report` and `row_observers`; users call `next_request_id`,
    `next_seed`, `tenant_for` and `record`."""

    settings: LoadSettings
    tenants: TenantSet = field(init=False)
    model: str = ""
    log: RequestLog | None = None
    watcher: Watcher | None = None
    nonce: str = field(default_factory=lambda: secrets.token_hex(3))
    flushed: set[str] = field(default_factory=set)  # (master) workers that answered the flush
    roll: LoadWorkers | None = None  # (master / only process) who sends the load
    report: dict[str, Callable[[], Any]] = field(default_factory=dict)  # (master) more of load.json, as of now
    row_observers: list[Callable[[RequestOutcome], None]] = field(default_factory=list)  # (master)
    _buffer: list[RequestOutcome] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.configure(self.settings)

    def configure(self, settings: LoadSettings) -> None:
        self.settings, self.tenants = settings, TenantSet(parse_tenants(settings.tenants))

    def next_request_id(self) -> str:
        """Unique across the processes of a run: a per-process nonce and a counter."""
        return f"{self.nonce}-{next(self._ids)}"

    def tenant_for(self, traffic_class: str) -> Tenant:
        """The tenant of the next user of this class: round-robin over all the process's users,
        whatever their scenario (`TenantSet.next_of_class`)."""
        return self.tenants.next_of_class(traffic_class)

    def next_seed(self) -> str:
        return f"seed-{self.next_request_id()}"

    def record(self, outcome: RequestOutcome) -> None:
        self._buffer.append(outcome)

    def forward(self, runner: Runner) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            runner.send_message(OUTCOMES_MESSAGE, [o.to_message() for o in batch])

    def open_log(self) -> RequestLog:
        if self.log is None:
            origin = self.settings.t0_unix or time.time()
            self.log = RequestLog(self.settings.requests_csv or None, origin)
        return self.log

    def write_report(self, **state: Any) -> None:
        """(master) Write the roll and the rest of the report to --kvgate-load-json, if given."""
        if self.settings.load_json and self.roll is not None:
            parts = {name: part() for name, part in self.report.items()}
            write_load_json(self.settings.load_json, {**self.roll.to_dict(), **parts, **state})


_CONTEXTS: WeakKeyDictionary[Environment, ScenarioContext] = WeakKeyDictionary()


def context_of(environment: Environment) -> ScenarioContext:
    ctx = _CONTEXTS.get(environment)
    if ctx is None:
        ctx = _CONTEXTS[environment] = ScenarioContext(settings_of(environment))
    return ctx


def settings_of(environment: Environment) -> LoadSettings:
    try:
        return LoadSettings.from_options(environment.parsed_options)
    except ValueError as err:  # SettingsError, TenantSpecError
        raise SystemExit(f"kvgate scenarios: {err}") from None


def resolve_model(host: str, tenant: Tenant) -> str:
    """The first model the target serves (GET /v1/models), for a run that named none."""
    try:
        resp = httpx.get(
            f"{host.rstrip('/')}/v1/models", headers={"Authorization": f"Bearer {tenant.key}"}, timeout=10.0
        )
        return str(resp.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as err:
        log.error(
            "could not read the model name from %s/v1/models (%s); sending %r: set --kvgate-model",
            host,
            err,
            FALLBACK_MODEL,
        )
        return FALLBACK_MODEL
