"""Choosing what to preempt, and how (a victim score with aging; swap or recompute, by cost).

Victim choice keeps the request with the highest *keep score*:

    keep = 10 · priority                      (system 2, interactive 1, batch 0)
         +  2 · waited_s / aging_s            (long-waiting work is protected: aging)
         +  1 · recompute_cost_s              (work already invested is expensive to redo)
         +  3 · num_preemptions               (each preemption makes the next less likely)
         + 40 · streaming_started             (a user is reading it: only when nothing else is left)
         −  1 · pool_percent_held             (big holders free the most memory)

and preempts the lowest. A request preempted `max_consecutive_preemptions` times in a row is
not a candidate until it has made progress, unless nothing else can be preempted; together with
the aging term that bounds how long any request can be starved. `vllm_like` instead preempts
the most recently admitted request, as vLLM does, under the same cap: starvation protection is
the same for every policy.

Mode: recompute drops KV and re-prefills; swap copies KV to the host tier and back. `auto`
swaps when the round trip `2 · kv_bytes / link_bw` is cheaper than `prefill_time(len)`. `kill`
aborts the victim with an explicit error: the engine without preemption support that the
"preempted requests complete" gate is there to catch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from reference_engine.config import PreemptionMode
from reference_engine.policies.policy import VictimOrder
from reference_engine.request import PreemptionKind, Request


def keep_score(r: Request, now_s: float, aging_s: float, pool_blocks: int, recompute_cost_s: float) -> float:
    return (
        10.0 * r.priority
        + 2.0 * max(0.0, now_s - r.arrival_s) / aging_s
        + 1.0 * recompute_cost_s
        + 3.0 * r.num_preemptions
        + (40.0 if r.streaming and r.first_token_s is not None else 0.0)
        - 100.0 * len(r.block_ids) / pool_blocks
    )


def pick_victim(
    candidates: Iterable[Request],
    order: VictimOrder,
    max_consecutive: int,
    now_s: float,
    aging_s: float,
    pool_blocks: int,
    recompute_cost_s: Callable[[Request], float],
) -> Request | None:
    pool = [r for r in candidates if r.block_ids]
    if not pool:
        return None
    eligible = [r for r in pool if r.consecutive_preemptions < max_consecutive] or pool
    if order is VictimOrder.NEWEST:
        return max(eligible, key=lambda r: r.seq_no)
    return min(eligible, key=lambda r: (keep_score(r, now_s, aging_s, pool_blocks, recompute_cost_s(r)), -r.seq_no))


def choose_mode(
    mode: PreemptionMode, kv_bytes: float, host_has_room: bool, transfer_s: float, prefill_s: float
) -> PreemptionKind:
    if mode is PreemptionMode.KILL:
        return PreemptionKind.KILL
    if mode is PreemptionMode.RECOMPUTE or not host_has_room:
        return PreemptionKind.RECOMPUTE
    if mode is PreemptionMode.SWAP:
        return PreemptionKind.SWAP
    return PreemptionKind.SWAP if 2 * transfer_s < prefill_s else PreemptionKind.RECOMPUTE
