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
reference engine) it says why once and stops while the rest runs on
(harness/loadgen/admin_chaos.py).
"""

from harness.loadgen.admin_chaos import ScheduledChaos
from harness.loadgen.router_chaos import RESTORE, SCHEDULE


class RouterChaos(ScheduledChaos):
    scenario = "router_chaos"
    endpoint = "/admin/router/chaos"
    interval_setting = "router_chaos_interval_s"
    schedule, restore, disturbs = SCHEDULE, RESTORE, "prefix index"
