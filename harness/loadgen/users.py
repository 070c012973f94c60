"""`KvgateUser`: the base of every scenario's locust user.

A scenario subclasses it, names itself (`scenario`), says which traffic class it speaks for,
and writes tasks with `self.chat(prompt, max_tokens=...)`. The base does the rest the same way
for every scenario: picks the user's tenant (round-robin over the tenants of its class, across
the users of every scenario), sends the request through the shared exchange
(harness/loadgen/exchange.py), fires the locust events, and hands the outcome to the run record.

Locust events per request, so the web UI and CSV stats show what the record holds:

    request_type  name                         response_time       failure
    POST          <scenario>/<traffic_class>   end to end (ms)     errors and timeouts
    CANCEL        <scenario>/<traffic_class>   until the hang-up   never (an intended cancel)
    REJECTED      <scenario>/<traffic_class>   until the refusal   never (an explicit 429/503/529)
    UNFINISHED    <scenario>/<traffic_class>   until the stop      never (cut when the run stopped)
    TTFT          ttft/<scenario>/<class>      first content (ms)  never (only answered requests)

A user that is refused with a Retry-After waits it out before its next request, as the OpenAI
client does: asking again at once would count the same refused demand over and over.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any, ClassVar

import gevent
import gevent.pool
from locust import FastHttpUser

from harness.loadgen.exchange import Call, Cancel, Result, run_exchange
from harness.loadgen.gevent_transport import GeventTransport
from harness.loadgen.outcome import RequestOutcome, Status
from harness.loadgen.plugin import ScenarioContext, context_of
from harness.loadgen.prompts import Prompt
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant


class RequestFailed(Exception):
    """What locust's failure table shows: `<http status> <error code>`."""


class KvgateUser(FastHttpUser):
    abstract = True
    scenario: ClassVar[str] = ""
    traffic_class: ClassVar[str] = "interactive"
    uses_step_shape: ClassVar[bool] = False
    _counter: ClassVar[itertools.count]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._counter = itertools.count()

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.ctx: ScenarioContext = context_of(environment)
        self.index = next(type(self)._counter)
        self.rng = random.Random(f"{self.ctx.nonce}-{self.scenario}-{self.index}")
        self.tenant: Tenant = self.ctx.tenant_for(self.traffic_class)
        if not self.host:
            raise ValueError("kvgate's users need locust's --host: the target's base URL")
        self.transport = GeventTransport(
            self.host, connection_timeout_s=self.connection_timeout, network_timeout_s=self.settings.request_timeout_s
        )

    @property
    def settings(self) -> LoadSettings:
        return self.ctx.settings

    def wait_time(self) -> float:
        return self.rng.uniform(self.settings.wait_min_s, self.settings.wait_max_s)

    def on_stop(self) -> None:
        self.transport.close()

    def seed(self) -> str:
        """A fresh seed for the words of one request's question."""
        return self.ctx.next_seed()

    def chat(
        self,
        prompt: Prompt,
        *,
        max_tokens: int | None,
        tenant: Tenant | None = None,
        session_id: str = "",
        rebuildable: bool = True,
        cancel: Cancel | None = None,
    ) -> Result:
        call = Call(
            request_id=self.ctx.next_request_id(),
            scenario=self.scenario,
            phase=self.settings.phase,
            tenant=tenant or self.tenant,
            model=self.ctx.model,
            prompt=prompt,
            max_tokens=max_tokens,
            session_id=session_id,
            rebuildable=rebuildable,
            cancel=cancel,
        )
        result = run_exchange(self.transport, call, timeout_s=self.settings.request_timeout_s, on_done=self._report)
        if result.outcome.retry_after_s:
            gevent.sleep(result.outcome.retry_after_s)
        return result

    def at_once(self, num: int, send: Callable[[], Any]) -> None:
        """Run `send` `num` times concurrently (a burst), and wait for all of them."""
        group = gevent.pool.Group()
        for _ in range(num):
            group.spawn(send)
        group.join()

    def _report(self, outcome: RequestOutcome) -> None:
        report_to_locust(self.environment, outcome)
        self.ctx.record(outcome)


def report_to_locust(environment: Any, outcome: RequestOutcome) -> None:
    """Fire the locust events of one request (module docstring), so the web UI and CSV stats show
    what the record holds: every user does, and the open loop's sender (open_loop_users.py)."""
    name = f"{outcome.scenario}/{outcome.traffic_class}"
    context = {
        "tenant": outcome.tenant,
        "request_id": outcome.request_id,
        "engine_request_id": outcome.engine_request_id,
    }
    fire = environment.events.request.fire
    failure = RequestFailed(f"{outcome.http_status or '-'} {outcome.error_code}") if outcome.is_failure else None
    request_type = (
        "CANCEL"
        if outcome.status == Status.CANCELLED.value
        else "UNFINISHED"
        if outcome.status == Status.UNFINISHED.value
        else "REJECTED"
        if outcome.is_rejection
        else "POST"
    )
    fire(
        request_type=request_type,
        name=name,
        response_time=(outcome.e2e_s or 0.0) * 1000,
        response_length=outcome.completion_tokens or 0,
        exception=failure,
        context=context,
    )
    if outcome.ttft_s is not None:
        fire(
            request_type="TTFT",
            name=f"ttft/{name}",
            response_time=outcome.ttft_s * 1000,
            response_length=0,
            exception=None,
            context=context,
        )
