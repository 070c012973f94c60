"""Who sends the load, asked of every locust worker as it connects: its identity, its clock.

    kvgate_hello     W -> M  {kvgate, scenarios}: sent once connected; the master admits the
                             worker and pings it, or refuses it
                     M -> W  {}: who are you? (a worker the master has not heard from yet)
    kvgate_refused   M -> W  {reason}: the worker says why and quits (exit code 2)
    kvgate_ping      M -> W  {sent_s}: the worker answers at once with kvgate_pong
    kvgate_pong      W -> M  {sent_s, answered_s}: one clock sample (clock_sync.py)

The master keeps what it learns in its roll (load_workers.py, `ScenarioContext.roll`) and writes
it to its report (--kvgate-load-json) whenever it changes. At the test's start it waits until
every connected worker has said who it is (`await_hellos`): locust's --expect-workers counts a
worker from its connection, before kvgate has admitted it. During the run `gone_workers` marks
those whose heartbeat stopped, or that left, as lost.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_MISSING, MasterRunner, Runner, WorkerRunner

from harness.loadgen.clock_sync import ClockSample
from harness.loadgen.context import ScenarioContext, context_of
from harness.loadgen.load_workers import NUM_CLOCK_SAMPLES, Identity

log = logging.getLogger("kvgate.scenarios")

HELLO_MESSAGE, REFUSED_MESSAGE = "kvgate_hello", "kvgate_refused"
PING_MESSAGE, PONG_MESSAGE = "kvgate_ping", "kvgate_pong"
HELLO_WAIT_S = 10.0
HELLO_POLL_S = 0.05
PING_INTERVAL_S = 0.02
EXIT_REFUSED = 2


def register(runner: Runner, identity: Identity) -> None:
    """Listen for this runner's side of the roll call; a worker introduces itself."""
    if isinstance(runner, MasterRunner):
        runner.register_message(HELLO_MESSAGE, _on_hello)
        runner.register_message(PONG_MESSAGE, _on_pong)
    elif isinstance(runner, WorkerRunner):
        runner.register_message(REFUSED_MESSAGE, _on_refused)
        runner.register_message(PING_MESSAGE, _on_ping)
        runner.register_message(HELLO_MESSAGE, lambda **_: runner.send_message(HELLO_MESSAGE, identity.to_message()))
        runner.send_message(HELLO_MESSAGE, identity.to_message())


def _on_hello(environment: Environment, msg: Any, **_: Any) -> None:
    """(master) Admit a worker that runs what the master runs, and time its clock; refuse any other."""
    ctx, runner = context_of(environment), environment.runner
    assert ctx.roll is not None and isinstance(runner, MasterRunner)
    if ctx.roll.is_admitted(msg.node_id):  # it said so twice (asked again): one roll entry, one clock
        return
    refusal = ctx.roll.admit(msg.node_id, runner.get_worker_index(msg.node_id), Identity.from_message(msg.data))
    if refusal is not None:
        log.error("kvgate: refused %s", refusal)
        runner.send_message(REFUSED_MESSAGE, {"reason": refusal}, client_id=msg.node_id)
        if msg.node_id in runner.clients:  # no users, no slots, and it counts for no --expect-workers
            del runner.clients[msg.node_id]
    else:
        runner.greenlet.spawn(_ping, runner, msg.node_id)
    ctx.write_report(started=False)


def _on_refused(environment: Environment, msg: Any, **_: Any) -> None:
    """(worker) The master will not have us: say why and quit with a harness error."""
    log.error("kvgate: refused by the master: %s", msg.data["reason"])
    environment.process_exit_code = EXIT_REFUSED
    assert environment.runner is not None
    environment.runner.greenlet.spawn(environment.runner.quit)


def _ping(runner: MasterRunner, client_id: str) -> None:
    for _ in range(NUM_CLOCK_SAMPLES):
        runner.send_message(PING_MESSAGE, {"sent_s": time.time()}, client_id=client_id)
        gevent.sleep(PING_INTERVAL_S)


def _on_ping(environment: Environment, msg: Any, **_: Any) -> None:
    assert environment.runner is not None
    environment.runner.send_message(PONG_MESSAGE, {"sent_s": msg.data["sent_s"], "answered_s": time.time()})


def _on_pong(environment: Environment, msg: Any, **_: Any) -> None:
    ctx = context_of(environment)
    assert ctx.roll is not None
    ctx.roll.add_sample(msg.node_id, ClockSample(msg.data["sent_s"], msg.data["answered_s"], time.time()))


def gone_workers(ctx: ScenarioContext, runner: MasterRunner) -> list[str]:
    """(master) Mark admitted workers whose heartbeat stopped, or that left, as lost; their names."""
    assert ctx.roll is not None
    present = {c.id for c in runner.clients.all if c.state != STATE_MISSING}
    lost = ctx.roll.mark_lost(w.client_id for w in ctx.roll.live() if w.client_id not in present)
    for name in lost:
        log.error("kvgate: locust worker %s was lost mid-run: what it had not sent is never sent", name)
    return lost


def await_hellos(ctx: ScenarioContext, runner: MasterRunner) -> None:
    """(master) Start only once every connected worker has said who it is (a refused one may
    already have been counted by locust's --expect-workers), and only with as many admitted
    workers as expected: otherwise say so, in the log and the report, and end the run."""
    assert ctx.roll is not None
    roll = ctx.roll
    refused = {r["client_id"] for r in roll.refused}
    for client in runner.clients.all:  # a hello sent before the master listened is asked for again
        if not roll.is_admitted(client.id) and client.id not in refused:
            runner.send_message(HELLO_MESSAGE, {}, client_id=client.id)
    deadline = time.monotonic() + HELLO_WAIT_S
    while time.monotonic() < deadline and not all(roll.is_admitted(c.id) for c in runner.clients.all):
        gevent.sleep(HELLO_POLL_S)
    admitted = [c.id for c in runner.clients.all if roll.is_admitted(c.id)]
    if len(admitted) < roll.expected:
        log.error("kvgate: %d of %d expected locust workers admitted: the run ends", len(admitted), roll.expected)
        ctx.write_report(started=False)
        runner.greenlet.spawn(runner.quit)
        return
    ctx.write_report(started=True)
