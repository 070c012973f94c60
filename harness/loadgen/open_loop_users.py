"""The open loop on locust: one seeded schedule, dealt by the master, sent by every locust process.

    locust -f harness/loadgen/open_loop_locustfile.py --headless --host URL --kvgate-rate 20 -t 20s --processes 2

A closed-loop user waits for its answer before it asks again; an open loop sends each request at
a time fixed in advance (docs/load.md). Here every locust process — the only one, or each worker
of a master, on this host (`--processes`) or on others — runs one `OpenLoopUser`, whose greenlet
is that process's sender (sender.py): it sends the slots the master deals to it, each at its
time, every request in a greenlet of its own. The master makes the schedule and deals it
(dealer.py); `OpenLoopShape` keeps one user per process and ends the test once the schedule has
been sent and answered.

The master (or the only process):

    test_start    read the workload from the settings (workloads.py: chat at --kvgate-rate, or
                  --kvgate-trace) and start dealing, in a greenlet:
    dealing       wait until every process's sender runs and its clock offset is measured (at
                  most SENDER_WAIT_S), fix the schedule's origin START_DELAY_S ahead, then every
                  DEAL_INTERVAL_S deal the slots due within LOOKAHEAD_S to the live senders; once
                  all are dealt, wait for their rows (at most a request timeout and DRAIN_MARGIN_S
                  after the last is due, and not for a lost worker's); then the shape ends the test
    rows          each row's request id is recorded with the dealer (plugin.py `row_observers`)
    report        load.json's `open_loop`: the workload, the origin, the dealer's account, why
                  it stopped early if it did (plugin.py `write_report`)

Every process that sends:

    test_start    make the sender (the settings and model the plugin has just resolved)
    user start    run the sender, and tell the master `kvgate_sender_ready`
    kvgate_slots  hand the slots to the sender
    test_stop     stop the sender: what is still in flight is cut, one `unfinished` row each,
                  forwarded with the rest (plugin.py's flush)

Messages (plugin.py lists the others):

    kvgate_sender_ready  W -> M  {}: this process's sender runs
    kvgate_slots         M -> W  {origin_unix, slots}: slots dealt to it, the origin on its clock
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import gevent
from locust import LoadTestShape, User, constant, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from harness.loadgen.dealer import Dealer
from harness.loadgen.outcome import RequestOutcome
from harness.loadgen.plugin import ScenarioContext, context_of  # and with it, its listeners
from harness.loadgen.roll_call import gone_workers
from harness.loadgen.schedule import Slot
from harness.loadgen.sender import Sender
from harness.loadgen.users import report_to_locust
from harness.loadgen.workloads import workload_of

log = logging.getLogger("kvgate.scenarios")

READY_MESSAGE, SLOTS_MESSAGE = "kvgate_sender_ready", "kvgate_slots"
SENDER_WAIT_S = 30.0
START_DELAY_S = 1.0
LOOKAHEAD_S = 2.0
DEAL_INTERVAL_S = 0.1
DRAIN_POLL_S = 0.2
DRAIN_MARGIN_S = 10.0
RUN_SLICE_S = 0.5


@dataclass(eq=False)
class OpenLoopState:
    """One process's part of the open loop. The master's greenlet sets `dealer`, `origin_unix`,
    `problem` and `is_complete`; the process's own listeners `sender` and `ready`."""

    sender: Sender | None = None
    ready: set[str] = field(default_factory=set)  # (master) processes whose sender runs
    dealer: Dealer | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    origin_unix: float | None = None
    duration_s: float | None = None
    problem: str = ""
    is_complete: bool = False

    def report(self) -> dict[str, Any]:
        """load.json's `open_loop`, as of now."""
        return {
            "workload": self.workload,
            "origin_unix": self.origin_unix,
            "duration_s": self.duration_s,
            "schedule": self.dealer.summary() if self.dealer is not None else None,
            "problem": self.problem,
        }


_STATES: WeakKeyDictionary[Environment, OpenLoopState] = WeakKeyDictionary()


def state_of(environment: Environment) -> OpenLoopState:
    state = _STATES.get(environment)
    if state is None:
        state = _STATES[environment] = OpenLoopState()
    return state


class OpenLoopUser(User):
    """A process's sender, as a locust user (the shape runs one per process). Its task sends for
    a short slice and returns, again and again, so that the user stops as soon as it is asked."""

    wait_time = constant(0.0)

    @task
    def send(self) -> None:
        sender = state_of(self.environment).sender
        if sender is None:
            gevent.sleep(RUN_SLICE_S)
        else:
            sender.run(for_s=RUN_SLICE_S)

    def on_start(self) -> None:
        assert self.environment.runner is not None
        self.environment.runner.send_message(READY_MESSAGE, {})


class OpenLoopShape(LoadTestShape):
    """One sender user per locust process, until the schedule has been sent and answered."""

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        if state_of(self.runner.environment).is_complete:
            return None
        num = self.runner.worker_count if isinstance(self.runner, MasterRunner) else 1
        return max(1, num), float(max(1, num))


@events.init.add_listener
def _on_init(environment: Environment, runner: Any, **_: Any) -> None:
    if runner is None:
        return
    if not isinstance(runner, WorkerRunner):
        runner.register_message(READY_MESSAGE, _on_ready)
        context_of(environment).row_observers.append(functools.partial(_on_row, state_of(environment)))
    if not isinstance(runner, MasterRunner):
        runner.register_message(SLOTS_MESSAGE, _on_slots)


def _on_row(state: OpenLoopState, outcome: RequestOutcome) -> None:
    """(master) A row came back: the dealer accounts for it."""
    if state.dealer is not None:
        state.dealer.record(outcome.request_id)


def _on_ready(environment: Environment, msg: Any, **_: Any) -> None:
    state_of(environment).ready.add(msg.node_id)


def _on_slots(environment: Environment, msg: Any, **_: Any) -> None:
    sender = state_of(environment).sender
    if sender is None:  # a bug: the master deals only to processes whose sender said it runs
        log.error("kvgate: %d open-loop requests dealt before this process's sender was made", len(msg.data["slots"]))
        return
    sender.receive(msg.data["origin_unix"], [Slot.from_message(s) for s in msg.data["slots"]])


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    ctx, state, runner = context_of(environment), state_of(environment), environment.runner
    if not isinstance(runner, MasterRunner):
        settings = ctx.settings.with_(model=ctx.model)

        def record(outcome: RequestOutcome) -> None:
            report_to_locust(environment, outcome)
            ctx.record(outcome)

        state.sender = Sender(environment.host or "", settings, ctx.tenants, record=record)
    if not isinstance(runner, WorkerRunner):
        state.is_complete, state.dealer, state.problem = False, None, ""
        ctx.report["open_loop"] = state.report
        assert runner is not None
        runner.greenlet.spawn(_deal, environment, ctx, state)


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    state = state_of(environment)
    if state.sender is not None:
        if state.sender.num_unsent:
            log.error("kvgate: %d open-loop requests dealt to this process were never sent", state.sender.num_unsent)
        state.sender.stop()


def _deal(environment: Environment, ctx: ScenarioContext, state: OpenLoopState) -> None:
    """(master) The dealing greenlet (module docstring); the shape ends the test once it returns."""
    try:
        _deal_schedule(environment, ctx, state)
    finally:
        state.is_complete = True


def _deal_schedule(environment: Environment, ctx: ScenarioContext, state: OpenLoopState) -> None:
    runner, settings = environment.runner, ctx.settings
    assert runner is not None and ctx.roll is not None
    roll = ctx.roll
    workload = workload_of(settings)
    run_time_s = getattr(environment.parsed_options, "run_time", None)
    state.duration_s = settings.schedule_s or run_time_s or None
    if workload is None or state.duration_s is None:
        state.problem = "an open loop needs --kvgate-rate or --kvgate-trace, and --kvgate-schedule-s or --run-time"
        log.error("kvgate: %s", state.problem)
        return
    state.workload = workload.describe()

    def senders() -> list[str]:
        if isinstance(runner, MasterRunner):
            gone_workers(ctx, runner)
        return [w.name for w in roll.live() if w.client_id in state.ready and roll.has_clock(w.client_id)]

    expected = max(1, roll.expected) if isinstance(runner, MasterRunner) else 1
    deadline = time.monotonic() + SENDER_WAIT_S
    while len(senders()) < expected and time.monotonic() < deadline:
        gevent.sleep(DEAL_INTERVAL_S)
    if not senders():
        state.problem = f"no sender started within {SENDER_WAIT_S:.0f} s: nothing was sent"
        log.error("kvgate: %s", state.problem)
        return
    dealer = state.dealer = Dealer(workload.slots(settings, ctx.tenants, state.duration_s), lookahead_s=LOOKAHEAD_S)
    origin = state.origin_unix = time.time() + START_DELAY_S
    while not dealer.is_exhausted:
        live = senders()
        if not live:
            state.problem = "every locust worker was lost: the rest of the schedule was never sent"
            log.error("kvgate: %s", state.problem)
            return
        for name, slots in dealer.deal(time.time() - origin, live).items():
            client_id = roll.client_of(name)
            data = {"origin_unix": origin + roll.offset_s(client_id), "slots": [s.to_message() for s in slots]}
            runner.send_message(SLOTS_MESSAGE, data, client_id=client_id)
        gevent.sleep(DEAL_INTERVAL_S)
    drain_deadline = origin + dealer.last_at_s + settings.request_timeout_s + DRAIN_MARGIN_S
    while time.time() < drain_deadline and set(dealer.owed()) & set(senders()):
        gevent.sleep(DRAIN_POLL_S)
