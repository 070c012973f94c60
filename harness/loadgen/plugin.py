"""The locust side of the scenarios: options, one context per process, record forwarding.

Listeners are registered on `locust.events` when this module is imported: the one import-time
side effect here, and the one locust requires (the options must exist before it parses the
command line). Each listener is small and says what it does:

    init_command_line_parser  add the --kvgate-* options (settings.py)
    init                      refresh the event loop's clock; build this process's
                              ScenarioContext; the master (or the only process) keeps the roll
                              of the load's processes (load_workers.py) and listens for
                              forwarded outcomes; a worker says who it is (`hello`), answers
                              clock pings and flush requests, and starts its forwarding loop;
                              decide whether the step shape drives; weigh the user classes by
                              --kvgate-mix; a headless run with --kvgate-record-dir starts its
                              watcher (watcher.py)
    test_start                re-read the settings (the web UI may have changed them), resolve
                              the model name, open the request log (master / only process), and
                              start the watcher if init did not (a run from the web UI); the
                              master holds the start until every worker has said who it is, and
                              ends the run if fewer than it expects were admitted
    test_stop                 a worker forwards whatever is still buffered; the master flushes
                              every worker (below), and marks those that never answer as lost
    quitting                  forward what is left, close the request log, write the master's
                              report (--kvgate-load-json); with --kvgate-record-dir, judge the
                              run (watcher.py)

Messages between the master (M) and its workers (W), besides locust's own:

    kvgate_hello, kvgate_refused, kvgate_ping, kvgate_pong   who a worker is, its clock (roll_call.py)
    kvgate_outcomes  W -> M  [outcome, ...]: rows, once a second and when the test stops
    kvgate_flush     M -> W  stop the users, forward everything, answer kvgate_flushed
    kvgate_flushed   W -> M  sent after the worker's last outcomes and stats report
    kvgate_sender_ready, kvgate_slots                        an open loop's (open_loop_users.py)

Forwarding: every process that runs users buffers its outcomes and sends them with
`runner.send_message("kvgate_outcomes", ...)` once a second and when the test stops; the master
(or a local runner, which delivers its messages to itself) writes them, each named for the
process that sent it (`load_worker`) and moved onto the master's clock by that worker's measured
offset. A run with `--processes N` or separate workers so records every request exactly once,
in one place, on one time axis.

The flush: locust's master ends a headless run by sending its workers `quit` and listening for
just 0.5 s more, while a worker first lets its users finish (up to --stop-timeout); on a busy
machine the last outcomes, and locust's own last stats report, then arrive after the master has
stopped listening, and are lost (a run recorded 23 of its 24 requests). So the master's
test_stop asks each worker to stop its users and send everything now (`kvgate_flush`), and
waits until each has answered `kvgate_flushed`, sent after its last outcomes and its last stats
report on the same ordered connection (at most --stop-timeout + FLUSH_MARGIN_S). A worker that
never answers is lost (load_workers.py): named in the log and the report, and its run is not
judged. One whose heartbeat has stopped is asked too — a worker starved of CPU for a few seconds
is missed by locust's heartbeat and yet alive, with rows to send — but waited for only
MISSING_GRACE_S once it is the last: a dead one would only delay the end.

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

import logging
import time
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.runners import STATE_MISSING, MasterRunner, Runner, WorkerRunner

from harness.loadgen import roll_call
from harness.loadgen.context import OUTCOMES_MESSAGE, ScenarioContext, context_of, resolve_model, settings_of
from harness.loadgen.load_workers import LoadWorkers, identity_of
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.settings import add_arguments, apply_mix, parse_mix
from harness.loadgen.watcher import Watcher, default_load_json, default_rows

__all__ = ["ScenarioContext", "context_of", "resolve_model", "step_shape_wanted"]

log = logging.getLogger("kvgate.scenarios")

FLUSH_MESSAGE, FLUSHED_MESSAGE = "kvgate_flush", "kvgate_flushed"
FORWARD_INTERVAL_S = 1.0
FLUSH_MARGIN_S = 30.0
FLUSH_POLL_S = 0.05
MISSING_GRACE_S = 5.0


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
    identity = identity_of(environment.parsed_locustfiles or [])
    if not isinstance(runner, WorkerRunner):
        runner.register_message(OUTCOMES_MESSAGE, _on_outcomes)
    if isinstance(runner, MasterRunner):
        ctx.roll = LoadWorkers(identity, expected=getattr(options, "expect_workers", 0) or 0)
        runner.register_message(FLUSHED_MESSAGE, _on_flushed)
    else:
        runner.greenlet.spawn(_forward_loop, ctx, runner)
    if isinstance(runner, WorkerRunner):
        runner.register_message(FLUSH_MESSAGE, _on_flush)
    elif not isinstance(runner, MasterRunner):
        ctx.roll = LoadWorkers.alone(identity)
    roll_call.register(runner, identity)  # before anything that waits: workers say hello at once
    if ctx.settings.record_dir and options is not None and not isinstance(runner, WorkerRunner):
        # the watcher follows the request log: it must exist, and its times count from now
        options.kvgate_requests_csv = options.kvgate_requests_csv or default_rows(ctx.settings.record_dir)
        options.kvgate_load_json = options.kvgate_load_json or default_load_json(ctx.settings.record_dir)
        options.kvgate_t0_unix = options.kvgate_t0_unix or time.time()
        ctx.configure(settings_of(environment))
        if options.headless:  # ready before locust starts the --run-time clock (see "The watcher")
            ctx.watcher = Watcher.start(ctx.settings, environment.host or "")


def _on_outcomes(environment: Environment, msg: Any, **_: Any) -> None:
    """(master / only process) Rows, named for their sender and moved onto the master's clock."""
    ctx = context_of(environment)
    assert ctx.roll is not None
    name, offset_s = ctx.roll.name_of(msg.node_id), ctx.roll.offset_s(msg.node_id)
    outcomes = [RequestOutcome.from_message(d).on_master(name, offset_s) for d in msg.data]
    ctx.open_log().add(outcomes)
    for observe in ctx.row_observers:
        for outcome in outcomes:
            observe(outcome)


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
    """(master) Ask every worker to flush and wait for their answers (module docstring); those
    that never answer are lost."""
    assert ctx.roll is not None
    roll_call.gone_workers(ctx, runner)  # those that left already
    workers = {client.id for client in runner.clients.all}
    for worker in workers - ctx.flushed:
        runner.send_message(FLUSH_MESSAGE, client_id=worker)
    began = time.monotonic()
    while not workers <= ctx.flushed and time.monotonic() < began + stop_timeout_s + FLUSH_MARGIN_S:
        missing = {c.id for c in runner.clients.all if c.state == STATE_MISSING}
        if workers - ctx.flushed <= missing and time.monotonic() > began + MISSING_GRACE_S:
            break
        gevent.sleep(FLUSH_POLL_S)
    if unanswered := workers - ctx.flushed:
        log.error(
            "locust workers %s did not send their last outcomes: the record misses their last requests",
            ", ".join(ctx.roll.name_of(w) for w in sorted(unanswered)),
        )
        ctx.roll.mark_lost(unanswered)


def _forward_loop(ctx: ScenarioContext, runner: Runner) -> None:
    while True:
        gevent.sleep(FORWARD_INTERVAL_S)
        ctx.forward(runner)


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    ctx = context_of(environment)
    ctx.configure(settings_of(environment))
    if not isinstance(environment.runner, WorkerRunner):
        ctx.open_log()
        if ctx.settings.record_dir and ctx.watcher is None:
            ctx.watcher = Watcher.start(ctx.settings, environment.host or "")
    if isinstance(environment.runner, MasterRunner):
        ctx.flushed.clear()
        roll_call.await_hellos(ctx, environment.runner)
        return
    ctx.write_report(started=True)
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
        ctx.write_report(started=True)
    if ctx.watcher is not None:
        environment.process_exit_code = ctx.watcher.finish()
