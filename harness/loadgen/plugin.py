"""The locust side of the scenarios: options, one context per process, record forwarding.

Listeners are registered on `locust.events` when this module is imported: the one import-time
side effect here, and the one locust requires (the options must exist before it parses the
command line). Each listener is small and says what it does:

    init_command_line_parser  add the --kvgate-* options (settings.py)
    init                      refresh the event loop's clock; build this process's
                              ScenarioContext; the master (or the only process) listens for
                              forwarded outcomes; every other process starts its forwarding
                              loop and answers flush requests; decide whether the step shape
                              drives; weigh the user classes by --kvgate-mix; a headless run
                              with --kvgate-record-dir starts its watcher (watcher.py)
    test_start                re-read the settings (the web UI may have changed them), resolve
                              the model name, open the request log (master / only process), and
                              start the watcher if init did not (a run from the web UI)
    test_stop                 a worker forwards whatever is still buffered; the master flushes
                              every worker (below) before the test may end
    quitting                  forward what is left, close the request log; with
                              --kvgate-record-dir, judge the run (watcher.py)

Forwarding: every process that runs users buffers its outcomes and sends them with
`runner.send_message("kvgate_outcomes", ...)` once a second and when the test stops; the master
(or a local runner, which delivers its messages to itself) writes them. A run with
`--processes N` or separate workers so records every request exactly once, in one place.

The flush: locust's master ends a headless run by sending its workers `quit` and listening for
just 0.5 s more, while a worker first lets its users finish (up to --stop-timeout); on a busy
machine the last outcomes, and locust's own last stats report, then arrive after the master has
stopped listening, and are lost (a run recorded 23 of its 24 requests). So the master's
test_stop asks each worker to stop its users and send everything now (`kvgate_flush`), and
waits until each has answered `kvgate_flushed`, sent after its last outcomes and its last stats
report on the same ordered connection (at most --stop-timeout + FLUSH_MARGIN_S; a worker that
never answers is named in the log).

The watcher: a headless run starts `kvgate watch` in `init`, before locust starts its users and
its --run-time clock, which begin together. Started at test_start, as a run from the web UI
still does, a watcher slowed by a busy machine took longer to start than a 4 s run lasted: the
run sent nothing and exited 0.

The clock: gevent's loop caches its time and refreshes it once per loop turn. Before locust
sets its --run-time timer the loop has not turned since the hub was created, so on a busy
machine, where imports take seconds, the timer was set from a stale time and fired at once
(a 6 s load that ran 0.35 s). `init` refreshes it.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import gevent
import httpx
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, Runner, WorkerRunner

from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.request_log import RequestLog
from harness.loadgen.settings import LoadSettings, add_arguments, apply_mix, parse_mix
from harness.loadgen.tenants import Tenant, TenantSet, parse_tenants
from harness.loadgen.watcher import Watcher, default_rows

log = logging.getLogger("kvgate.scenarios")

OUTCOMES_MESSAGE = "kvgate_outcomes"
FLUSH_MESSAGE, FLUSHED_MESSAGE = "kvgate_flush", "kvgate_flushed"
FORWARD_INTERVAL_S = 1.0
FLUSH_MARGIN_S = 30.0
FLUSH_POLL_S = 0.05
FALLBACK_MODEL = "default"


@dataclass(eq=False)
class ScenarioContext:
    """What the users of one locust process share. Only the listeners below call `configure`
    and set `model` and `log`; users call `next_request_id`, `next_seed`, `tenant_for` and
    `record`."""

    settings: LoadSettings
    tenants: TenantSet = field(init=False)
    model: str = ""
    log: RequestLog | None = None
    watcher: Watcher | None = None
    nonce: str = field(default_factory=lambda: secrets.token_hex(3))
    flushed: set[str] = field(default_factory=set)  # (master) workers that answered the flush
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


_CONTEXTS: WeakKeyDictionary[Environment, ScenarioContext] = WeakKeyDictionary()


def context_of(environment: Environment) -> ScenarioContext:
    ctx = _CONTEXTS.get(environment)
    if ctx is None:
        ctx = _CONTEXTS[environment] = ScenarioContext(_settings(environment))
    return ctx


def _settings(environment: Environment) -> LoadSettings:
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


def step_shape_wanted(environment: Environment) -> bool:
    """The step shape drives a run only when its user class was chosen: named on the command
    line (`locust -f scenarios/ StepLoad`), or the only class (`-f scenarios/step_load.py`).
    In the mixed default (`-f scenarios/`), --users/--spawn-rate drive, as in any locust run."""
    if not any(getattr(u, "uses_step_shape", False) for u in environment.user_classes):
        return False
    named = bool(getattr(environment.parsed_options, "user_classes", None))
    return named or len(environment.available_user_classes or {}) == 1


@events.init_command_line_parser.add_listener
def _add_options(parser: Any, **_: Any) -> None:
    add_arguments(parser)


@events.init.add_listener
def _on_init(environment: Environment, runner: Runner | None, **_: Any) -> None:
    gevent.get_hub().loop.update_now()  # see "The clock" in the module docstring
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the model lookup is not news
    ctx = context_of(environment)
    if getattr(environment.shape_class, "is_step_load", False) and not step_shape_wanted(environment):
        environment.shape_class = None
    apply_mix(environment.user_classes, parse_mix(ctx.settings.mix))
    if runner is None:
        return
    options = environment.parsed_options
    if ctx.settings.record_dir and options is not None and not isinstance(runner, WorkerRunner):
        # the watcher follows the request log: it must exist, and its times count from now
        options.kvgate_requests_csv = options.kvgate_requests_csv or default_rows(ctx.settings.record_dir)
        options.kvgate_t0_unix = options.kvgate_t0_unix or time.time()
        if options.headless:  # ready before locust starts the --run-time clock (see "The watcher")
            ctx.watcher = Watcher.start(_settings(environment), environment.host or "")
    if not isinstance(runner, WorkerRunner):
        runner.register_message(OUTCOMES_MESSAGE, _on_outcomes)
    if isinstance(runner, MasterRunner):
        runner.register_message(FLUSHED_MESSAGE, _on_flushed)
    else:
        runner.greenlet.spawn(_forward_loop, ctx, runner)
    if isinstance(runner, WorkerRunner):
        runner.register_message(FLUSH_MESSAGE, _on_flush)


def _on_outcomes(environment: Environment, msg: Any, **_: Any) -> None:
    context_of(environment).open_log().add(RequestOutcome.from_message(d) for d in msg.data)


def _on_flush(environment: Environment, **_: Any) -> None:
    """(worker) Stop the users, then send every outcome and the last stats report, then say so."""
    runner = environment.runner
    assert isinstance(runner, WorkerRunner)
    runner.stop()  # waits for the users up to --stop-timeout; a no-op once stopped
    context_of(environment).forward(runner)
    runner._send_stats()  # locust's final report, otherwise sent only on `quit` (and then too late)
    runner.send_message(FLUSHED_MESSAGE)


def _on_flushed(environment: Environment, msg: Any, **_: Any) -> None:
    context_of(environment).flushed.add(msg.node_id)


def _flush_workers(ctx: ScenarioContext, runner: MasterRunner, stop_timeout_s: float) -> None:
    """(master) Ask every worker to flush and wait for their answers (module docstring)."""
    workers = {client.id for client in runner.clients.all}
    for worker in workers - ctx.flushed:
        runner.send_message(FLUSH_MESSAGE, client_id=worker)
    deadline = time.monotonic() + stop_timeout_s + FLUSH_MARGIN_S
    while not workers <= ctx.flushed and time.monotonic() < deadline:
        gevent.sleep(FLUSH_POLL_S)
    if not workers <= ctx.flushed:
        log.error(
            "locust workers %s did not send their last outcomes: the record may miss their last requests",
            ", ".join(sorted(workers - ctx.flushed)),
        )


def _forward_loop(ctx: ScenarioContext, runner: Runner) -> None:
    while True:
        gevent.sleep(FORWARD_INTERVAL_S)
        ctx.forward(runner)


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    ctx = context_of(environment)
    ctx.configure(_settings(environment))
    if not isinstance(environment.runner, WorkerRunner):
        ctx.open_log()
        if ctx.settings.record_dir and ctx.watcher is None:
            ctx.watcher = Watcher.start(ctx.settings, environment.host or "")
    if isinstance(environment.runner, MasterRunner):
        ctx.flushed.clear()
        return
    ctx.model = ctx.settings.model or resolve_model(environment.host or "", ctx.tenants.all[0])


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        _flush_workers(context_of(environment), runner, environment.stop_timeout or 0.0)
    elif runner is not None:
        context_of(environment).forward(runner)


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    ctx = context_of(environment)
    if environment.runner is not None and not isinstance(environment.runner, MasterRunner):
        ctx.forward(environment.runner)
    if ctx.log is not None:
        ctx.log.close()
    if ctx.watcher is not None:
        environment.process_exit_code = ctx.watcher.finish()
