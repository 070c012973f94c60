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
target that is not a served P/D pair it says why once and stops while the rest runs on
(harness/loadgen/admin_chaos.py). A P/D deployment of another engine is disturbed from the client's side instead
(pd_scenarios/pd_chaos.py).
"""

from harness.loadgen.admin_chaos import ScheduledChaos
from harness.loadgen.pd_chaos import RESTORE, SCHEDULE


class PdTransferChaos(ScheduledChaos):
    scenario = "pd_transfer_chaos"
    endpoint = "/admin/pd/chaos"
    interval_setting = "pd_chaos_interval_s"
    schedule, restore, disturbs = SCHEDULE, RESTORE, "P/D link"
