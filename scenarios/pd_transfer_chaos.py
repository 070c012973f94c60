"""P/D transfer chaos: disturb the link of a served P/D pair while the other scenarios run,
through its admin API (`POST /admin/pd/chaos`, admin key: --kvgate-admin-key).

Every --kvgate-pd-chaos-interval-s one step of harness/loadgen/pd_chaos.py: transfers cancelled
the moment they start, the link 5 times slower (pulls queue, the prefill side holds its blocks
longer), the prefill engine killed while transfers are in flight, transfers that fail (they fall
back to a prefill on the decode side); each undone a step later. Beside traffic whose prompts
are worth transferring and answers that keep the decode pool full (`long_prompt`,
`long_output`, `cancel_storm`). Every request must end explicitly, and after the drain neither
pool may hold a block for a request that is gone: `cancel_release` and `capacity_after_drain`
per pool, `no_stranded_reservation` on the decode side. It sends no completions: each change
shows as a CHAOS entry in locust. At its end it undoes every change.

Off unless --kvgate-pd-chaos-interval-s is set (then it sleeps through the run); against a
target that is not a served P/D pair it says why once and stops while the rest runs on. A P/D
deployment of another engine is disturbed from the client's side instead
(pd_scenarios/pd_chaos.py).
"""

import logging

from locust import task
from locust.exception import StopUser

from harness.loadgen.pd_chaos import RESTORE, SCHEDULE, Body
from harness.loadgen.users import KvgateUser

log = logging.getLogger("kvgate.scenarios")
OFF_IDLE_S = 86_400.0
"""How long the user sleeps when chaos is off: through the run, never stopping (a user that stops
during spawning is spawned again)."""


class PdTransferChaos(KvgateUser):
    scenario = "pd_transfer_chaos"
    traffic_class = "system"
    fixed_count = 1

    def wait_time(self) -> float:
        interval_s = self.settings.pd_chaos_interval_s
        return interval_s if interval_s > 0 else OFF_IDLE_S

    def on_start(self) -> None:
        self.num_steps = 0
        self.changed = False
        if self.settings.pd_chaos_interval_s <= 0:
            log.warning("pd_transfer_chaos is off: set --kvgate-pd-chaos-interval-s to disturb the link")
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
            "/admin/pd/chaos", json=body, headers=self.admin, name="admin/pd/chaos", catch_response=True
        ) as r:
            r.success()  # a target without a P/D link is not failing: it has none to disturb
            if r.status_code != 200:
                self.stop_for(f"no P/D link to disturb at {self.host}: HTTP {r.status_code} {r.text[:200]}")

    def on_stop(self) -> None:
        if self.changed:
            self.client.post("/admin/pd/chaos", json=RESTORE, headers=self.admin, name="admin/pd/chaos")
        super().on_stop()

    def stop_for(self, reason: str) -> None:
        log.warning("pd_transfer_chaos stops: %s", reason)
        raise StopUser()
