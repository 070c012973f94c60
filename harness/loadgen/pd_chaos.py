"""The P/D link chaos schedule: what the `pd_transfer_chaos` scenario asks `POST /admin/pd/chaos`
for, step by step (a served P/D pair of the reference engine, docs/pd.md).

One step every `--kvgate-pd-chaos-interval-s`, in this order, then again from the top:

    cancel_mid_transfer  every third transfer aborted the moment it starts: a cancel that lands
                         mid-transfer, timed to the transfer (which only the engine can see)
    no_cancels           none are
    slow_link            every transfer 5 times slower (RDMA fallen back to TCP): pulls queue,
                         the prefill side holds its blocks longer, and a transfer not landed
                         within the pair's `transfer_timeout_ms` fails and falls back
    kill_prefill         the prefill engine dies while the slow link has transfers in flight: its
                         prefills end worker_lost, every transfer not landed loses its source
                         and fails, and the decode side must let its reservations go (once)
    full_speed           the link back
    failing_transfers    three transfers in ten fail
    no_failures          none do

So each way a transfer can go wrong happens while the load runs, and is undone within a cycle
(a kill needs no undoing: the pair serves on, its prefill side empty);
`RESTORE` undoes everything, for the scenario's end.
"""

from __future__ import annotations

from harness.loadgen.chaos_steps import Body, ChaosStep

CANCEL_EVERY = 3
LINK_SLOWDOWN = 5.0
FAILURE_RATE = 0.3


SCHEDULE: tuple[ChaosStep, ...] = (
    ChaosStep("cancel_mid_transfer", {"cancel_every": CANCEL_EVERY}),
    ChaosStep("no_cancels", {"cancel_every": 0}),
    ChaosStep("slow_link", {"link_slowdown": LINK_SLOWDOWN}),
    ChaosStep("kill_prefill", {"kill_prefill": True}),
    ChaosStep("full_speed", {"link_slowdown": 1.0}),
    ChaosStep("failing_transfers", {"failure_rate": FAILURE_RATE}),
    ChaosStep("no_failures", {"failure_rate": 0.0}),
)

RESTORE: tuple[Body, ...] = ({"cancel_every": 0, "link_slowdown": 1.0, "failure_rate": 0.0},)
"""The call that leaves the link chaos-free."""
