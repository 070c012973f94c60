"""Worker kill: every --kvgate-kill-interval-s, kill -9 one reference-engine worker.

Only against the reference engine run with several workers (`kvgate serve --workers N`,
N >= 2) on a loopback address: the pid comes from /admin/workers (admin key:
--kvgate-admin-key). Streams on the dead worker must end with a clear 503/SSE `worker_lost`,
its reservations must be released (no orphans), and the supervisor restarts it. Against any
other target this user says why once and stops; the rest of the mix runs on. It sends no
completions itself: the kills show as CHAOS entries in locust and `worker_died` events in the
record.
"""

import logging

from locust import task
from locust.exception import StopUser

from harness.loadgen.chaos import KillRefused, choose_victim, kill_worker, parse_workers
from harness.loadgen.users import KvgateUser

log = logging.getLogger("kvgate.scenarios")


class WorkerKill(KvgateUser):
    scenario = "worker_kill"
    traffic_class = "system"
    fixed_count = 1

    def wait_time(self) -> float:
        return self.settings.kill_interval_s

    def on_start(self) -> None:
        self.num_kills = 0
        self.wait()  # let the load build up before the first kill

    @task
    def kill_one(self) -> None:
        headers = {"Authorization": f"Bearer {self.settings.admin_key}"}
        with self.client.get("/admin/workers", headers=headers, name="admin/workers", catch_response=True) as resp:
            status = resp.status_code
            resp.success()  # a target without an admin API is not failing: it has none
            body = resp.json() if status == 200 else {}
        if status != 200:
            self.stop_for(f"no worker list at {self.host}/admin/workers (HTTP {status})")
        try:
            victim = choose_victim(self.host, parse_workers(body), self.num_kills)
        except KillRefused as refused:
            if refused.permanent:
                self.stop_for(str(refused))
            return
        with self.environment.events.request.measure("CHAOS", f"kill_worker/{self.scenario}"):
            kill_worker(victim)
        self.num_kills += 1

    def stop_for(self, reason: str) -> None:
        log.warning("worker_kill stops: %s", reason)
        raise StopUser()
