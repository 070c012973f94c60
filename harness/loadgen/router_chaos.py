"""The router chaos schedule: what the `router_chaos` scenario asks `POST /admin/router/chaos`
for, step by step (the reference engine's router, docs/server.md).

One step every `--kvgate-router-chaos-interval-s`, in this order, then again from the top:

    drop_kv_events     half of the workers' KV event batches are thrown away: a stale index
    keep_kv_events     none are
    delay_kv_events    each batch is applied a second after it arrived: an index that lags
    prompt_kv_events   at once again
    restart_index      the index emptied and the subscriptions reopened: a router that restarted

So the index is wrong in every way it can be while the load runs, and whole again within a
cycle; `restore` undoes everything, for the scenario's end. A replica killed and replaced is
`worker_kill`'s, which runs beside it.
"""

from __future__ import annotations

from harness.loadgen.chaos_steps import Body, ChaosStep

DROP_FRACTION = 0.5
DELAY_S = 1.0


SCHEDULE: tuple[ChaosStep, ...] = (
    ChaosStep("drop_kv_events", {"drop_kv_events": DROP_FRACTION}),
    ChaosStep("keep_kv_events", {"drop_kv_events": 0.0}),
    ChaosStep("delay_kv_events", {"kv_events_delay_s": DELAY_S}),
    ChaosStep("prompt_kv_events", {"kv_events_delay_s": 0.0}),
    ChaosStep("restart_index", {"restart_index": True}),
)

RESTORE: tuple[Body, ...] = ({"drop_kv_events": 0.0}, {"kv_events_delay_s": 0.0})
"""The calls that leave the router chaos-free."""
