"""A chaos user that changes a reference target through one admin endpoint, one step of a
schedule at a time, and undoes its changes at its end: what the `router_chaos` and
`pd_transfer_chaos` scenarios are (their schedules: router_chaos.py, pd_chaos.py beside this).

    class RouterChaos(ScheduledChaos):
        scenario = "router_chaos"
        endpoint, interval_setting = "/admin/router/chaos", "router_chaos_interval_s"
        schedule, restore, disturbs = SCHEDULE, RESTORE, "prefix index"

Every `interval_setting` seconds (a LoadSettings field; 0: off, the user sleeps through the run,
so a mixed default never disturbs a target by surprise) it posts the next step's body with the
admin key (--kvgate-admin-key). A target without the endpoint is not failing, it has nothing of
that kind: the user says why once and stops while the rest runs on. Each change shows as a CHAOS
entry in locust; it sends no completions.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from locust import task
from locust.exception import StopUser

from harness.loadgen.chaos_steps import Body, ChaosStep
from harness.loadgen.users import KvgateUser

log = logging.getLogger("kvgate.scenarios")
OFF_IDLE_S = 86_400.0
"""How long the user sleeps when chaos is off: through the run, never stopping (a user that stops
during spawning is spawned again)."""


class ScheduledChaos(KvgateUser):
    abstract = True
    traffic_class = "system"
    fixed_count = 1
    endpoint: ClassVar[str] = ""
    interval_setting: ClassVar[str] = ""
    schedule: ClassVar[tuple[ChaosStep, ...]] = ()
    restore: ClassVar[tuple[Body, ...]] = ()
    disturbs: ClassVar[str] = ""  # what the endpoint changes, for the messages

    @property
    def interval_s(self) -> float:
        return float(getattr(self.settings, self.interval_setting))

    def wait_time(self) -> float:
        return self.interval_s if self.interval_s > 0 else OFF_IDLE_S

    def on_start(self) -> None:
        self.num_steps = 0
        self.changed = False
        if self.interval_s <= 0:
            flag = "--kvgate-" + self.interval_setting.replace("_", "-")
            log.warning("%s is off: set %s to disturb the %s", self.scenario, flag, self.disturbs)
        self.wait()  # let the load build up (off: sleep through the run)

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.admin_key}"}

    @task
    def next_step(self) -> None:
        step = self.schedule[self.num_steps % len(self.schedule)]
        with self.environment.events.request.measure("CHAOS", f"{step.name}/{self.scenario}"):
            self.change(step.body)
        self.changed = True
        self.num_steps += 1

    def change(self, body: Body) -> None:
        name = self.endpoint.lstrip("/")
        with self.client.post(self.endpoint, json=body, headers=self.admin, name=name, catch_response=True) as r:
            r.success()  # a target without the endpoint is not failing: it has nothing to disturb
            if r.status_code != 200:
                self.stop_for(f"no {self.disturbs} to disturb at {self.host}: HTTP {r.status_code} {r.text[:200]}")

    def on_stop(self) -> None:
        if self.changed:
            for body in self.restore:
                self.client.post(self.endpoint, json=body, headers=self.admin, name=self.endpoint.lstrip("/"))
        super().on_stop()

    def stop_for(self, reason: str) -> None:
        log.warning("%s stops: %s", self.scenario, reason)
        raise StopUser()
