"""Tier chaos: disturb the reference engine's KV tiers (host DRAM, disk) while the other
scenarios run, through its admin API (`POST /admin/tiers/chaos`, admin key:
--kvgate-admin-key).

Every --kvgate-tier-chaos-interval-s one step of harness/loadgen/tier_chaos.py: load failures
on, every tier's reads cut --kvgate-tier-chaos-slowdown times, reads restored, the disk
detached, reattached, failures off; then again. Run it beside traffic whose prefixes go down
to the tiers and come back, multi-turn conversations on a pool they outgrow:
`--scenarios tier_chaos,multi_turn`. The engine must answer every turn, recomputing what a
failed, slow or vanished load would have given, and the `tier_loads` gate judges it. It sends no
completions: each change shows as a CHAOS entry in locust. At its end it undoes every change.

Off unless --kvgate-tier-chaos-interval-s is set (then it sleeps through the run, so the mixed
default never disturbs a tiered engine by surprise); against an engine without tiers, or a
target without the admin API, it says why once and stops while the rest runs on.
"""

import logging

from locust import task
from locust.exception import StopUser

from harness.loadgen.tier_chaos import Body, ChaosStep, restore, schedule
from harness.loadgen.users import KvgateUser

log = logging.getLogger("kvgate.scenarios")
OFF_IDLE_S = 86_400.0
"""How long the user sleeps when chaos is off (--kvgate-tier-chaos-interval-s unset): through the
run, never stopping (a user that stops during spawning is spawned again, and again)."""


class TierChaos(KvgateUser):
    scenario = "tier_chaos"
    traffic_class = "system"
    fixed_count = 1

    def wait_time(self) -> float:
        interval_s = self.settings.tier_chaos_interval_s
        return interval_s if interval_s > 0 else OFF_IDLE_S

    def on_start(self) -> None:
        self.tiers: list[str] = []
        self.steps: list[ChaosStep] = []
        self.num_steps = 0
        if self.settings.tier_chaos_interval_s <= 0:
            log.warning("tier_chaos is off: set --kvgate-tier-chaos-interval-s to disturb the tiers")
        self.wait()  # let the load build up (off: sleep through the run)

    def prepare(self) -> None:
        """The first task: find the tiers and plan the steps, or stop. (A user that stops while
        locust is still spawning is spawned again: hence the wait in on_start first.)"""
        s = self.settings
        with self.client.get("/admin/snapshot", headers=self.admin, name="admin/snapshot", catch_response=True) as r:
            r.success()  # a target without an admin API is not failing: it has none
            snapshot = r.json() if r.status_code == 200 else {}
        if r.status_code != 200:
            self.stop_for(f"no admin snapshot at {self.host}/admin/snapshot (HTTP {r.status_code})")
        self.tiers = list(snapshot.get("tiers", {}))
        if not self.tiers:
            self.stop_for("the engine has no KV tiers ([tiers] host_gib, disk_gib)")
        self.steps = schedule(self.tiers, s.tier_chaos_slowdown, s.tier_chaos_failure_rate)

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.admin_key}"}

    @task
    def next_step(self) -> None:
        if not self.steps:
            self.prepare()
            return  # the wait before the next call lets the tiers fill before the first step
        step = self.steps[self.num_steps % len(self.steps)]
        with self.environment.events.request.measure("CHAOS", f"{step.name}/{self.scenario}"):
            for body in step.bodies:
                self.change(body)
        self.num_steps += 1

    def change(self, body: Body) -> None:
        with self.client.post(
            "/admin/tiers/chaos", json=body, headers=self.admin, name="admin/tiers/chaos", catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code} {r.text[:200]}")
                self.stop_for(f"the engine refused {body}: HTTP {r.status_code} {r.text[:200]}")

    def on_stop(self) -> None:
        for body in restore(self.tiers):  # nothing without tiers
            self.client.post("/admin/tiers/chaos", json=body, headers=self.admin, name="admin/tiers/chaos")
        super().on_stop()

    def stop_for(self, reason: str) -> None:
        log.warning("tier_chaos stops: %s", reason)
        raise StopUser()
