"""Event-driven stepping for replay: fuse decode steps while nothing else can change.

A run of decode-only steps can be applied at once when, for every step in it, step-by-step
simulation would do exactly the same thing: nobody is waiting, prefilling or swapped; no request
finishes before the last fused step; usage stays below every rung that triggers an action and
within what the pool can give without preemption; no idle session expires; and every fused step
starts before `until_s` (the next arrival or sample the driver cares about). Then each running
request gains K tokens and K steps' worth of blocks, and the step durations are summed.

Block boundaries do not stop a run: each request's blocks for all K steps are allocated at once,
which the pool serves exactly as it would one by one (no other pool operation happens between).
All requests grow before any of them finishes, as in the last fused step, whose schedule()
allocates for the whole batch before update() releases the finished requests' blocks: otherwise
a finished request's freed blocks would feed the next request's growth instead of the free stack
and cached blocks it would use step by step (same live blocks, different cached/free split).
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING

from reference_engine.core.request import FinishReason
from reference_engine.core.scheduler import RequestOutput

if TYPE_CHECKING:
    from reference_engine.core.engine import EngineCore, StepOutput

_MAX_FUSED_STEPS = 4096


def fast_forward(core: "EngineCore", until_s: float) -> "StepOutput | None":
    from reference_engine.core.engine import StepOutput

    sched, pool, kv = core.scheduler, core.pool, core.kv
    sample_run = getattr(core.executor, "sample_run", None)
    running = list(sched.running.values())
    if (sample_run is None or not running or len(sched.waiting) or sched.swapped or sched.prefilling
            or core.policy.compressor is not None or core._in_flight is not None):
        return None
    max_ctx = core.admission.max_context_tokens
    k_max = min(min(r.remaining_output(), max_ctx - r.num_tokens) for r in running)
    k_max = min(k_max, _MAX_FUSED_STEPS)
    if k_max <= 1:
        return None
    now = core.clock.now()
    expiry = sched.sessions.next_expiry_s()
    horizon = until_s if expiry is None else min(until_s, expiry)
    num_kv = sum(r.num_kv_tokens for r in running)
    # Price only the steps that can start before the horizon: at most (horizon - now) / first step,
    # since later steps are no shorter. (A cap on how many to fuse; correctness rests on bisect below.)
    first_s = core.executor.decode_durations_s(len(running), num_kv, 1)[0]
    if horizon < math.inf and first_s > 0:
        k_max = min(k_max, int((horizon - now) / first_s) + 1)
    durations = core.executor.decode_durations_s(len(running), num_kv, k_max)
    starts, t = [], now
    for d in durations:  # accumulate exactly as step-by-step does: t_end = t_start + duration
        starts.append(t)
        t = t + d
    k = min(k_max, bisect.bisect_left(starts, horizon))  # steps that start before the horizon
    k = min(k, _fit_blocks(core, running, k))
    if k <= 1:
        return None

    t_end = starts[k - 1] + durations[k - 1]
    total_s = t_end - now
    for r in running:  # every request's growth before any finish frees blocks, as step by step
        kv.allocate(r, k, now)  # checked by _fit_blocks: cannot fail
    outputs = []
    for r in running:
        tokens = sample_run(r.request_id, r.num_tokens, k)
        r.num_computed_tokens += k
        r.output_token_ids.extend(tokens)
        r.gpu_time_s += total_s / len(running)
        r.last_step_s = t_end
        r.consecutive_preemptions = 0
        kv.register_full_blocks(r)
        out = RequestOutput(r, tokens)
        outputs.append(out)
        if r.remaining_output() == 0 or r.num_tokens >= max_ctx:
            stop = r.eos_after is not None and r.num_output_tokens >= r.eos_after
            sched.finish(r, FinishReason.STOP if stop else FinishReason.LENGTH, t_end)
            out.finished = True
    core.num_steps += k
    core._note_level(t_end)
    return StepOutput(now, t_end, outputs, k, k * len(running))


def _fit_blocks(core: "EngineCore", running, k: int) -> int:
    """The largest number of steps (≤ k) whose block growth triggers no action and needs no
    eviction of live state: it stays within what the pool can allocate and below the next rung."""
    pool, marks, kv = core.pool, core.marks, core.kv
    limit = pool.num_allocatable
    if core.policy.watermarks:
        live = pool.num_live
        for mark in (marks.evict, marks.preempt):
            if live < mark:
                limit = min(limit, mark - live - 1)
        if live >= marks.evict and core.scheduler.reclaimable_blocks():
            return 0  # the evict rung is active: step by step

    def growth(steps: int) -> int:
        return sum(kv.new_blocks_needed(r, steps) for r in running)

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
