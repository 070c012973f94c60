"""Event-driven stepping for replay: fuse steps while nothing but their arithmetic changes.

A run of K steps can be applied at once when step-by-step simulation would do exactly the same
thing in each of them: nobody is swapped, and every waiting request is over its admission limit
for the whole run (see `_waiting_stays_blocked`); every running request decodes one token
per step (decodes go first), except at most one prefill, the first in running order, which takes
all the budget the decodes leave (so no other prefill advances) and completes its prompt, if at
all, in the last fused step — and then only when no other prefill would take the budget it leaves
over; no request finishes or gets its first token before the last fused step; usage
stays below every rung that triggers an action and within what the pool can give without
preemption; no queue deadline passes and no idle session expires; and every fused step starts
before `until_s` (the next
arrival or sample the driver cares about). Then the decodes gain K tokens, the prefill K chunks,
and the step durations are summed in the order step-by-step would add them.

Block boundaries do not stop a run: every request's blocks for all K steps are allocated at once,
which the pool serves exactly as it would one by one (no other pool operation happens between).
All requests grow before any of them finishes, as in the last fused step, whose schedule()
allocates for the whole batch before update() releases the finished requests' blocks: otherwise
a finished request's freed blocks would feed the next request's growth instead of the free stack
and cached blocks it would use step by step (same live blocks, different cached/free split).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reference_engine.core.request import FinishReason, Request
from reference_engine.core.scheduler import RequestOutput

if TYPE_CHECKING:
    from reference_engine.core.engine import EngineCore, StepOutput

_MAX_FUSED_STEPS = 4096


def fast_forward(core: "EngineCore", until_s: float) -> "StepOutput | None":
    from reference_engine.core.engine import StepOutput

    sched, kv = core.scheduler, core.kv
    sample_run = getattr(core.executor, "sample_run", None)
    if (sample_run is None or not sched.running or sched.swapped or core.policy.compressor is not None
            or core._in_flight is not None):
        return None
    max_ctx = core.admission.max_context_tokens
    run = _split(sched.running.values(), max_ctx, kv.block_tokens)
    decodes, prefill, num_prefills = run.decodes, run.prefill, run.num_prefills
    chunk = 0 if prefill is None else sched.token_budget - len(decodes)
    if chunk and len(sched.waiting) and 0 < sched.long_prefill_cap < chunk:
        if num_prefills > 1:
            return None  # the budget the cap leaves over would go to the next prefill
        chunk = sched.long_prefill_cap  # what schedule() caps it to while others wait
    k_max = run.max_steps
    remaining = prefill.num_tokens - prefill.num_computed_tokens if chunk else 0
    if chunk:
        # the step that completes the prompt may be fused only if no other prefill would take
        # the budget it leaves over
        k_max = min(k_max, math.ceil(remaining / chunk) - (num_prefills > 1))
    if k_max <= 1 or not _waiting_stays_blocked(core):  # the queue scan after the cheap exits
        return None
    now = core.clock.now()
    timer = sched.next_timer_s()  # a queue deadline or a session expiry
    horizon = until_s if timer is None else min(until_s, timer)
    kv_tokens = run.kv_tokens
    chunk_start = prefill.num_kv_tokens if chunk else 0
    steady = core.executor.steady_durations_s
    # Price only the steps that can start before the horizon: at most (horizon - now) / first step,
    # since later steps are no shorter. (A cap on how many to fuse; correctness rests on bisect below.)
    first_s = steady(len(decodes), kv_tokens, 1, chunk, chunk_start)[0]
    if horizon < math.inf and first_s > 0:
        k_max = min(k_max, int((horizon - now) / first_s) + 1)
    durations = steady(len(decodes), kv_tokens, k_max, chunk, chunk_start)
    starts, t = [], now
    for d in durations:  # accumulate exactly as step-by-step does: t_end = t_start + duration
        starts.append(t)
        t = t + d
    k = min(k_max, bisect.bisect_left(starts, horizon))  # steps that start before the horizon
    k = min(k, _fit_blocks(core, run, chunk, remaining, k))
    if k <= 1:
        return None
    prefill_tokens = min(k * chunk, remaining)
    last_chunk = prefill_tokens - (k - 1) * chunk
    if chunk and last_chunk < chunk:  # the prompt completes in the last step, with a smaller chunk
        durations[k - 1] = steady(len(decodes), kv_tokens + (k - 1) * len(decodes), 1, last_chunk,
                                  chunk_start + (k - 1) * chunk)[0]

    t_end = starts[k - 1] + durations[k - 1]
    total_s = t_end - now
    step_tokens = len(decodes) + chunk
    for r, slack in zip(decodes, run.slacks):  # all growth before any finish frees blocks, as step by step
        if slack < k:
            kv.allocate(r, k, now)  # checked by _fit_blocks: cannot fail
    if chunk:
        kv.allocate(prefill, prefill_tokens, now)
    outputs = []
    for r in decodes:  # applied in plan order, decodes before the prefill, as update() does
        tokens = sample_run(r.request_id, r.num_tokens, k)
        r.num_computed_tokens += k
        r.gpu_time_s += total_s / step_tokens
        r.last_step_s = t_end
        outputs.append(sched.apply_sampled(r, tokens, t_end, max_ctx))
    if chunk:
        prefill.num_computed_tokens += prefill_tokens
        prefill.gpu_time_s += total_s * chunk / step_tokens
        prefill.last_step_s = t_end
        if prefill_tokens == remaining:  # it samples its next (maybe first) token at the end
            token = sample_run(prefill.request_id, prefill.num_tokens, 1)
            outputs.append(sched.apply_sampled(prefill, token, t_end, max_ctx))
        else:
            kv.register_full_blocks(prefill)
    core.num_steps += k
    core._note_level(t_end)
    return StepOutput(now, t_end, outputs, k, k * len(decodes) + prefill_tokens)


def _waiting_stays_blocked(core: "EngineCore") -> bool:
    """True when no waiting request can start during the run: each is over its class limit
    now, and the projected usage the limit is checked against cannot fall while only decodes
    and a prefill run (decode growth raises it; a prefill moves blocks from committed to live)."""
    sched = core.scheduler
    if not len(sched.waiting):
        return True
    if not core.admission.enabled:
        return False  # then only the pool decides, and its free blocks change every step
    projected, limit = sched.projected_blocks(), core.admission.class_limit
    return all(projected - r.pending_blocks + r.estimated_blocks > limit(r) for r in sched.waiting)


@dataclass(slots=True)
class _Batch:
    """The running set as a fused run sees it, from one pass over it."""

    decodes: list[Request] = field(default_factory=list)
    slacks: list[int] = field(default_factory=list)  # per decode: free token slots in its blocks
    prefill: Request | None = None  # the first prefill in running order: it gets the budget left
    num_prefills: int = 0
    kv_tokens: int = 0  # KV tokens the decodes read
    max_steps: int = _MAX_FUSED_STEPS  # steps before the first decode reaches its output or context limit


def _split(running, max_ctx: int, block_tokens: int) -> _Batch:
    """One pass over the running set (replay's hottest loop: properties inlined)."""
    batch = _Batch()
    decodes, slacks = batch.decodes, batch.slacks
    kv_tokens, max_steps = 0, _MAX_FUSED_STEPS
    for r in running:
        num_output = len(r.output_token_ids)
        num_tokens = r.num_prompt_tokens + num_output
        if num_tokens - r.num_computed_tokens != 1:
            if batch.prefill is None:
                batch.prefill = r
            batch.num_prefills += 1
            continue
        decodes.append(r)
        num_kv = r.num_computed_tokens - r.num_dropped_tokens
        kv_tokens += num_kv
        slacks.append(len(r.block_ids) * block_tokens - num_kv)
        left = r.output_limit - num_output
        if left < max_steps:
            max_steps = left
        if max_ctx - num_tokens < max_steps:
            max_steps = max_ctx - num_tokens
    batch.kv_tokens, batch.max_steps = kv_tokens, max(0, max_steps)
    return batch


def _fit_blocks(core: "EngineCore", run: _Batch, chunk: int, remaining: int, k: int) -> int:
    """The largest number of steps (≤ k) whose block growth triggers no action and needs no
    eviction of live state: it stays within what the pool can allocate and below the next rung
    of the ladder (crossing any rung is a `watermark` event, even where the policy ignores it)."""
    pool, marks, kv = core.pool, core.marks, core.kv
    limit = pool.num_allocatable
    live = pool.num_live
    above = [mark for mark in marks.thresholds if mark > live]
    if above:
        limit = min(limit, above[0] - live - 1)
    if core.policy.watermarks and live >= marks.evict and core.scheduler.reclaimable_blocks():
        return 0  # the evict rung is active: step by step

    bt, slacks, prefill = kv.block_tokens, run.slacks, run.prefill

    def growth(steps: int) -> int:
        blocks = sum([-((slack - steps) // bt) for slack in slacks if slack < steps])
        return blocks + (kv.new_blocks_needed(prefill, min(steps * chunk, remaining)) if chunk else 0)

    if growth(k) <= limit:
        return k
    lo, hi = 0, k  # growth(lo) fits, growth(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if growth(mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo
