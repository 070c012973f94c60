"""Router chaos: disturb a prefix-aware router's view of its workers' caches while the other
scenarios run, through its admin API (`POST /admin/router/chaos`, admin key:
--kvgate-admin-key).

Every --kvgate-router-chaos-interval-s one step of harness/loadgen/router_chaos.py: half the KV
event batches dropped, none, each delayed a second, none, the index emptied as by a router
restart; then again. Beside `worker_kill` (a replica killed and replaced) and traffic that shares
prefixes (`shared_prefix`, `multi_turn`). Every request must still be answered: a stale index
may only route worse, and the routing gates judge where requests went (`replica_kill`,
`unhealthy_routing`, `prefix_routing`). It sends no completions: each change shows as a CHAOS
entry in locust. At its end it undoes every change.

Off unless --kvgate-router-chaos-interval-s is set (then it sleeps through the run); against a
target without a prefix index (a single engine, another routing policy, KV events off, not the
reference engine) it says why once and stops while the rest runs on.
"""

import logging

from locust import task
from locust.exception import StopUser

from harness.loadgen.router_chaos import RESTORE, SCHEDULE, Body
from harness.loadgen.users import KvgateUser

log = logging.getLogger("kvgate.scenarios")
OFF_IDLE_S = 86_400.0
"""How long the user sleeps when chaos is off: through the run, never stopping (a user that stops
during spawning is spawned again)."""


class RouterChaos(KvgateUser):
    scenario = "router_chaos"
    traffic_class = "system"
    fixed_count = 1

    def wait_time(self) -> float:
        interval_s = self.settings.router_chaos_interval_s
        return interval_s if interval_s > 0 else OFF_IDLE_S

    def on_start(self) -> None:
        self.num_steps = 0
        self.changed = False
        if self.settings.router_chaos_interval_s <= 0:
            log.warning("router_chaos is off: set --kvgate-router-chaos-interval-s to disturb the router")
        self.wait()  # let the load build up (off: sleep through the run)

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.admin_key}"}

    @task
    def next_step(self) -> None:
        step = SCHEDULE[self.num_steps % len(SCHEDULE)]
        with self.environment.events.request.measure("CHAOS", f"{step.name}/{self.scenario}"):
            self.change(step.body)
        self.changed = True
        self.num_steps += 1

    def change(self, body: Body) -> None:
        with self.client.post(
            "/admin/router/chaos", json=body, headers=self.admin, name="admin/router/chaos", catch_response=True
        ) as r:
            r.success()  # a target without a prefix index is not failing: it has none to disturb
            if r.status_code != 200:
                self.stop_for(f"no prefix index to disturb at {self.host}: HTTP {r.status_code} {r.text[:200]}")

    def on_stop(self) -> None:
        if self.changed:
            for body in RESTORE:
                self.client.post("/admin/router/chaos", json=body, headers=self.admin, name="admin/router/chaos")
        super().on_stop()

    def stop_for(self, reason: str) -> None:
        log.warning("router_chaos stops: %s", reason)
        raise StopUser()
