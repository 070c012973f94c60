"""Event-driven stepping for replay: fuse steps while nothing but their arithmetic changes.

A run of K steps can be applied at once when step-by-step simulation would do exactly the same
thing in each of them: nobody is swapped, and nothing waiting starts (`_steps_nothing_starts`:
the steps leave it no token budget or sequence slot, or every waiting request is over its
admission limit for the whole run); every running decode gains
one token per step and every running prefill the chunk `Scheduler.prefill_chunks` gives it (the
same rules `schedule()` applies: capped while requests wait, otherwise the rest of the budget in
running order), the same chunk in every step, because no prompt completes before the last fused
step; that last step may be the one where the first prompt completes, whose chunks are computed
again (the completing prompts take what they have left and the budget they leave flows to the
prefills behind them, as in `schedule()`); no request finishes or gets its first token before
the last fused step; usage stays below every rung that triggers an action and within what the
pool can give without preemption; no queue deadline passes and no idle session expires; and
every fused step starts before `until_s` (the next arrival or sample the driver cares about).
Then the decodes gain K tokens, each prefill its K chunks, and the step durations are summed in
the order step-by-step would add them (each one from the same integer sums `execute` forms).

Block boundaries do not stop a run: the blocks of all K steps are allocated before anything is
applied, step by step in the order and at the times step-by-step allocates them
(`_allocate_growth`), and all before any request finishes, as in the last fused step, whose
schedule() allocates for the whole batch before update() releases the finished requests'
blocks: otherwise a finished request's freed blocks would feed the next request's growth instead
of the free stack and cached blocks it would use step by step (same live blocks, different
cached/free split).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reference_engine.request import Request
from reference_engine.core.scheduler import Scheduler
from reference_engine.core.snapshot import Growth, UsageSnapshot, take_snapshot

if TYPE_CHECKING:
    from reference_engine.core.engine import EngineCore, StepOutput
    from reference_engine.core.kv_manager import KVCacheManager
    from reference_engine.policies.policy import CompactionRule

_MAX_FUSED_STEPS = 4096


def fast_forward(core: "EngineCore", until_s: float, observe_s: Sequence[float] = ()) -> "StepOutput | None":
    from reference_engine.core.engine import StepOutput

    sched, kv = core.scheduler, core.kv
    sample_run = getattr(core.executor, "sample_run", None)
    if sample_run is None or not sched.running or sched.swapped or core._in_flight is not None:
        return None
    if core.policy.compressor is not None:
        return _fuse_compacting(core, until_s, observe_s, sample_run)
    max_ctx = core.admission.max_context_tokens
    run = _split(sched.running.values(), sched.prefilling, max_ctx, kv.block_tokens)
    decodes, num_decodes = run.decodes, len(run.decodes)
    prefills = _Prefills.plan(sched, run.prefills, sched.token_budget - num_decodes)
    k_max = min(run.max_steps, prefills.max_steps)
    if k_max > 1:
        k_max = min(k_max, _steps_nothing_starts(core, num_decodes, prefills))
    if k_max <= 1:
        return None
    now = core.clock.now()
    timer = sched.next_timer_s()  # a queue deadline or a session expiry
    horizon = until_s if timer is None else min(until_s, timer)
    kv_tokens = run.kv_tokens
    steady = core.executor.steady_durations_s
    chunks = prefills.uniform_chunks()
    # Price only the steps that can start before the horizon: at most (horizon - now) / first step,
    # since later steps are no shorter. (A cap on how many to fuse; correctness rests on bisect below.)
    first_s = steady(num_decodes, kv_tokens, 1, chunks)[0]
    if horizon < math.inf and first_s > 0:
        k_max = min(k_max, int((horizon - now) / first_s) + 1)
    durations = steady(num_decodes, kv_tokens, k_max, chunks)
    starts = _starts(now, durations)
    k = min(k_max, bisect.bisect_left(starts, horizon))  # steps that start before the horizon
    k = min(k, _fit_blocks(core, run, prefills, k))
    if k <= 1:
        return None
    observations = _observe(core, run, prefills, starts[:k], observe_s)  # before the run changes anything
    num_uniform = min(k, prefills.num_uniform)
    if k > num_uniform:  # the last step completes a prompt: its chunks differ
        durations[k - 1] = steady(num_decodes, kv_tokens + (k - 1) * num_decodes, 1, prefills.last_chunks())[0]

    t_end = starts[k - 1] + durations[k - 1]
    # GPU time is shared among a step's tokens: what one token per step gets over all the uniform
    # steps (their time over their equal token count), and in the last step
    uniform_s = (starts[num_uniform] if num_uniform < k else t_end) - now
    uniform_per_token = uniform_s / max(1, num_decodes + sum(prefills.chunks))
    last_per_token = (t_end - now - uniform_s) / (num_decodes + sum(prefills.last)) if k > num_uniform else 0.0
    tokens = prefills.tokens(k)
    _allocate_growth(core, run, prefills, starts[:k])
    outputs = []
    decode_gpu_s = uniform_per_token + last_per_token
    for r in decodes:  # applied in plan order, decodes before the prefills, as update() does
        new_tokens = sample_run(r.request_id, r.num_tokens, k)
        r.num_computed_tokens += k
        r.gpu_time_s += decode_gpu_s
        r.last_step_s = t_end
        outputs.append(sched.apply_sampled(r, new_tokens, t_end, max_ctx))
    for r, n, chunk, last in zip(prefills.requests, tokens, prefills.chunks, prefills.last or prefills.chunks):
        if not n:
            continue
        r.num_computed_tokens += n
        r.gpu_time_s += uniform_per_token * chunk + last_per_token * last
        r.last_step_s = t_end
        if r.num_computed_tokens == r.num_tokens:  # it samples its next (maybe first) token at the end
            outputs.append(sched.apply_sampled(r, sample_run(r.request_id, r.num_tokens, 1), t_end, max_ctx))
        else:
            kv.register_full_blocks(r)
    num_tokens = k * num_decodes + sum(tokens)
    core.count_steps(k, num_tokens)
    core._note_level(t_end)
    return StepOutput(now, t_end, outputs, k, num_tokens, observations)


def _fuse_compacting(core: "EngineCore", until_s: float, observe_s: Sequence[float],
                     sample_run: Callable[[str, int, int], list[int]]) -> "StepOutput | None":
    """A fused run under a token-level policy: when its compactions come follows from KV
    lengths (`Compressor.compaction_rule`); what they keep may also need what the compressor
    learns each step (h2o's scores), which `Compressor.skip_steps` adds for the steps between
    (a request whose compressor cannot do that, no rule: the run steps one by one).

    Each running request is a saw-tooth: blocks grown at the start of each step whose tokens
    pass its last block, a compaction (tokens dropped, blocks released) at the end of each step
    the rule names (`_saw_tooth`: under streamingllm a decode every block_tokens steps, a long
    prefill every step). The run is priced from the KV each step reads, checked rung by rung
    (after each step's growth below the next rung and within what the pool can give, the level
    at each step's end unchanged), then applied through the engine's own calls in step-by-step
    order: each step's growth at its start (decodes, then prefills), its compactions
    (`Scheduler.compress`, given the attention `execute` would: events, releases, moves) at its
    end in plan order, each request's counters and tokens set to that step and its compressor
    told of the steps since the last; an observe time is answered with a snapshot of the
    boundary it falls on, taken there. Narrower than the exact runs: it ends before a prompt
    completes or a request finishes."""
    from reference_engine.core.engine import StepOutput

    sched, kv, compressor = core.scheduler, core.kv, core.policy.compressor
    max_ctx = core.admission.max_context_tokens
    run = _split(sched.running.values(), sched.prefilling, max_ctx, kv.block_tokens)
    decodes, num_decodes = run.decodes, len(run.decodes)
    prefills = _Prefills.plan(sched, run.prefills, sched.token_budget - num_decodes)
    k_max = min(run.max_steps - 1, prefills.num_uniform)
    if k_max > 1:  # the queue scan after the cheap exits, as for exact runs
        k_max = min(k_max, _steps_nothing_starts(core, num_decodes, prefills))
    if k_max <= 1:
        return None
    now = core.clock.now()
    timer = sched.next_timer_s()
    horizon = min(until_s, math.inf if timer is None else timer)
    # (request, tokens per step) in plan order: the decodes, then the prefills that advance
    chunks = [(r, 1) for r in decodes] + [(r, c) for r, c in zip(prefills.requests, prefills.chunks) if c]
    num_new = sum(c for _, c in chunks)
    if not num_new:
        return None
    durations_of, attention_of = core.executor.fused_durations_s, core.executor.attention_of
    if horizon < math.inf:  # no step is shorter than one whose requests hold no KV
        shortest = durations_of(num_new, [sum(c * (c + 1) // 2 for _, c in chunks)], [0])[0]
        k_max = min(k_max, int((horizon - now) / shortest) + 1)
    if k_max <= 1:
        return None
    bt = kv.block_tokens
    grows: list[list[tuple[Request, int]]] = [[] for _ in range(k_max + 1)]  # step -> (request, blocks) at its start
    compacts: list[list[tuple[Request, int]]] = [[] for _ in range(k_max + 1)]  # step -> (request, kept) at its end
    # per step: KV tokens dropped at its end, the same weighted by chunk (for the pairs), blocks released
    dropped, dropped_pairs, released = [0] * (k_max + 1), [0] * (k_max + 1), [0] * (k_max + 1)
    # execute's sums: a chunk of c tokens over s held adds c·s + c(c+1)/2 pairs and reads s
    read = pairs = 0
    for r, c in chunks:
        rule = compressor.compaction_rule(r, kv.shared_prefix_tokens(r))
        if rule is None:
            return None
        kv_tokens = r.num_computed_tokens - r.num_dropped_tokens
        read += kv_tokens
        pairs += c * kv_tokens + c * (c + 1) // 2
        growth, compactions = _saw_tooth(kv_tokens, r.num_computed_tokens, len(r.block_ids), bt, c, rule, k_max)
        for step, blocks in growth:
            grows[step].append((r, blocks))
        for step, tokens, blocks, kept in compactions:
            compacts[step].append((r, kept))
            dropped[step] += tokens
            dropped_pairs[step] += c * tokens
            released[step] += blocks
    pairs_growth = sum(c * c for _, c in chunks)
    step_pairs, step_reads = [], []
    for step in range(1, k_max + 1):
        step_pairs.append(pairs)
        step_reads.append(read)
        pairs += pairs_growth - dropped_pairs[step]
        read += num_new - dropped[step]
    durations = durations_of(num_new, step_pairs, step_reads)
    starts = _starts(now, durations)
    k = _fit_saw_tooth(core, grows, released, min(k_max, bisect.bisect_left(starts, horizon)))
    if k <= 1:
        return None
    t_end = starts[k - 1] + durations[k - 1]
    ends = [*starts[1:k], t_end]
    base = {r.request_id: (r.num_computed_tokens, len(r.output_token_ids)) for r, _ in chunks}
    tokens = {r.request_id: sample_run(r.request_id, r.num_tokens, k) for r in decodes}
    observe_at: dict[int, list[float]] = {}  # boundary (after step j) -> the observe times it answers
    for t in observe_s:
        j = bisect.bisect_left(starts, t, 1, k)
        if j >= k:
            break  # past the run's last inner boundary: the caller's
        observe_at.setdefault(j, []).append(t)
    observations: list[tuple[float, UsageSnapshot]] = []
    chunk_of = {r.request_id: c for r, c in chunks}
    attention = {r.request_id: attention_of(r.request_id, c) for r, c in chunks}
    learnt = dict.fromkeys(chunk_of, 0)  # request -> the last step the compressor has seen
    sched.take_compactions()  # the moves queued for the first fused step: its plan takes them
    for step in range(1, k + 1):
        for r, blocks in grows[step]:
            c = chunk_of[r.request_id]
            r.num_computed_tokens = base[r.request_id][0] + (step - 1) * c
            kv.allocate(r, c, starts[step - 1])
        if step == k:
            sched.take_compactions()  # those of the steps before: taken by fused steps
        for r, kept in compacts[step]:
            rid = r.request_id
            computed, num_output = base[rid]
            r.num_computed_tokens = computed + (step - 1) * chunk_of[rid]
            compressor.skip_steps(r, attention[rid], step - 1 - learnt[rid])
            learnt[rid] = step
            r.num_computed_tokens += chunk_of[rid]
            r.output_token_ids.extend(tokens.get(rid, ())[:step])
            if not r.approximate and r.num_computed_tokens // bt > r.num_registered_blocks:
                kv.register_full_blocks(r)  # as update() did at the boundaries before
            sched.compress(r, attention[rid], ends[step - 1])
            assert r.num_kv_tokens == kept, "the compressor did not follow its compaction_rule"
            del r.output_token_ids[num_output:]
        if step in observe_at:  # the pool is as step by step leaves it here; so are the requests, now
            for r, c in chunks:
                r.num_computed_tokens = base[r.request_id][0] + step * c
            snapshot = take_snapshot(core, starts[step])
            observations.extend((t, snapshot) for t in observe_at[step])
    outputs = []
    gpu_s = (t_end - now) / num_new  # each step's time shared by its tokens
    for r, c in chunks:
        r.num_computed_tokens = base[r.request_id][0] + k * c
        compressor.skip_steps(r, attention[r.request_id], k - learnt[r.request_id])
        r.gpu_time_s += gpu_s * c
        r.last_step_s = t_end
        if r.request_id in tokens:  # a decode
            outputs.append(sched.apply_sampled(r, tokens[r.request_id], t_end, max_ctx))
        else:
            kv.register_full_blocks(r)
    core.count_steps(k, k * num_new)
    core._note_level(t_end)
    return StepOutput(now, t_end, outputs, k, k * num_new, observations)


def _starts(now: float, durations: list[float]) -> list[float]:
    """Each step's start, accumulated exactly as step-by-step does: t_end = t_start + duration."""
    starts, t = [], now
    for d in durations:
        starts.append(t)
        t = t + d
    return starts


def _saw_tooth(kv_tokens: int, computed_tokens: int, blocks: int, block_tokens: int, chunk: int,
               rule: CompactionRule, num_steps: int) -> tuple[list[tuple[int, int]], list[tuple[int, int, int, int]]]:
    """For a request holding `kv_tokens` of `computed_tokens` in `blocks` blocks that computes
    `chunk` tokens per step and compacts as `rule` says: (step, blocks grown) at the start of
    steps ≤ num_steps (from 1), and (step, tokens dropped, blocks released, tokens kept) of its
    compactions. O(events): it jumps from one to the next (streamingllm compacts a decode every
    block_tokens steps, a long prefill every step)."""
    growth: list[tuple[int, int]] = []
    compactions: list[tuple[int, int, int, int]] = []
    done, n = 0, kv_tokens
    compact_at, kept = _next_compaction(rule, n, computed_tokens, chunk, 0, num_steps)
    while True:
        grow_at = done + (blocks * block_tokens - n) // chunk + 1  # the next step whose tokens pass the last block
        step = min(grow_at, compact_at)
        if step > num_steps:
            return growth, compactions
        n += (step - done) * chunk
        done = step
        if grow_at == step:
            need = -(-n // block_tokens) - blocks
            growth.append((step, need))
            blocks += need
        if compact_at == step:
            kept_blocks = -(-kept // block_tokens)
            compactions.append((step, n - kept, blocks - kept_blocks, kept))
            n, blocks = kept, kept_blocks
            compact_at, kept = _next_compaction(rule, n, computed_tokens + step * chunk, chunk, step, num_steps)


def _next_compaction(rule: CompactionRule, kv_tokens: int, computed_tokens: int, chunk: int, done: int,
                     num_steps: int) -> tuple[float, int]:
    """The step (after `done`; infinity past `num_steps`) at whose end `rule` next compacts, and
    the tokens it keeps."""
    compaction = rule.next_compaction(kv_tokens, computed_tokens, chunk, num_steps - done)
    return (math.inf, 0) if compaction is None else (done + compaction[0], compaction[1])


def _fit_saw_tooth(core: "EngineCore", grows: list[list[tuple[Request, int]]], released: list[int], k: int) -> int:
    """`_fit_blocks` for a run whose blocks also fall: the steps (≤ k) whose allocations stay
    within what the pool can give and below the next rung, and whose releases leave the level
    (the rung usage is on, a `watermark` event when it changes) as it was at each step's end."""
    pool, marks, level = core.pool, core.marks, core.scheduler.level
    live, allocatable, room = pool.num_live, pool.num_allocatable, _rung_room(core)
    if room is None or marks.level(live) != level:
        return 0
    ceiling = live + room
    for step in range(1, k + 1):
        grown = sum(blocks for _, blocks in grows[step])
        live += grown
        allocatable -= grown
        if live > ceiling or allocatable < 0:
            return step - 1
        live -= released[step]
        allocatable += released[step]
        if marks.level(live) != level:
            return step - 1
    return k


def _allocate_growth(core: "EngineCore", run: "_Batch", prefills: "_Prefills", starts: list[float]) -> None:
    """Allocate the blocks of the fused steps (`_fit_blocks` checked that they fit), all before
    any request of the run finishes and frees blocks, as in the last step, whose schedule()
    allocates for the whole batch before update() releases anything.

    At once, request by request, when the pool's evictions do not depend on the time: then only
    which request gets which block differs from step-by-step, and block ids are never observed.
    When they do (multi_queue's demotions) and the run evicts cached blocks, step by step, in
    the order and at the time step-by-step allocates: in each step the decodes that cross a
    block boundary, then the prefills, at the step's start."""
    kv, pool, k = core.kv, core.pool, len(starts)
    if not (pool.evictions_depend_on_time and _growth(kv, run, prefills, k) > pool.num_free):
        for r, slack in zip(run.decodes, run.slacks):
            if slack < k:
                kv.allocate(r, k, starts[0])
        for r, n in zip(prefills.requests, prefills.tokens(k)):
            kv.allocate(r, n, starts[0])
        return
    bt = kv.block_tokens
    crossing: dict[int, list[Request]] = {}  # step -> decodes that need a new block in it
    for r, slack in zip(run.decodes, run.slacks):
        for step in range(slack + 1, k + 1, bt):
            crossing.setdefault(step, []).append(r)
    for step in range(1, k + 1):
        now = starts[step - 1]
        for r in crossing.get(step, ()):
            kv.allocate(r, step, now)  # r's KV before the run + `step` tokens
        for r, n in zip(prefills.requests, prefills.tokens(step)):
            if n:
                kv.allocate(r, n, now)  # the prefill's tokens in the run so far


def _observe(core: "EngineCore", run: "_Batch", prefills: "_Prefills", starts: list[float],
             observe_s: Sequence[float]) -> list[tuple[float, UsageSnapshot]]:
    """Snapshots for the observe times the run passes: the one at `t` shows the boundary after
    step j, the first whose end (`starts[j]`) is at or after `t`. Times past the last boundary
    inside the run are left to the caller, who sees the run's end state anyway."""
    out: list[tuple[float, UsageSnapshot]] = []
    bt, kv = core.kv.block_tokens, core.kv
    snap, snap_j = None, 0
    for t in observe_s:
        j = bisect.bisect_left(starts, t, 1)  # steps done by the first boundary at or after t
        if j >= len(starts):
            break
        if j != snap_j:
            by_owner: dict[str | None, int] = {}
            for r, slack in zip(run.decodes, run.slacks):
                if slack < j:
                    by_owner[r.tenant] = by_owner.get(r.tenant, 0) - ((slack - j) // bt)
            tokens = prefills.tokens(j)
            for r, n in zip(prefills.requests, tokens):
                public, private = kv.growth_owners(r, n)
                by_owner[None] = by_owner.get(None, 0) + public
                by_owner[r.tenant] = by_owner.get(r.tenant, 0) + private
            grown = Growth(by_owner, j * len(run.decodes) + sum(tokens))
            snap, snap_j = take_snapshot(core, starts[j], grown), j
        out.append((t, snap))
    return out


@dataclass(slots=True)
class _Prefills:
    """The running prefills over a fused run, in running order: each takes `chunks[i]` tokens
    per step (what `Scheduler.prefill_chunks` gives: capped while requests wait, the rest of the
    budget in order otherwise) for `num_uniform` steps, until the first of them would complete
    its prompt; the run may include that step, where the chunks are `last`: the completing
    prompts take what they have left, and what they leave over flows to the prefills behind."""

    requests: list[Request]
    chunks: list[int]
    starts: list[int]  # KV tokens of each before the run
    num_uniform: int = _MAX_FUSED_STEPS
    last: list[int] | None = None  # chunks of step num_uniform + 1 (None: no prefill advances)

    @classmethod
    def plan(cls, sched: Scheduler, requests: list[Request], budget: int) -> "_Prefills":
        remaining = [r.num_tokens - r.num_computed_tokens for r in requests]
        chunks = sched.prefill_chunks(remaining, budget) if requests else []
        out = cls(requests, chunks, [r.num_kv_tokens for r in requests])
        before_completion = [-(-n // c) - 1 for n, c in zip(remaining, chunks) if c]
        if before_completion:
            out.num_uniform = min(before_completion)
            out.last = sched.prefill_chunks([n - out.num_uniform * c for n, c in zip(remaining, chunks)], budget)
        return out

    @property
    def max_steps(self) -> int:
        return _MAX_FUSED_STEPS if self.last is None else self.num_uniform + 1

    def tokens(self, steps: int) -> list[int]:
        """Tokens each prefill computes in the first `steps` steps of the run."""
        if steps <= self.num_uniform:
            return [steps * c for c in self.chunks]
        return [self.num_uniform * c + last for c, last in zip(self.chunks, self.last)]

    def uniform_chunks(self) -> list[tuple[int, int]]:
        """(tokens, KV tokens before the run) of each advancing prefill, for the time model."""
        return [(c, s) for c, s in zip(self.chunks, self.starts) if c]

    def last_chunks(self) -> list[tuple[int, int]]:
        """(tokens, KV tokens before the step) of each prefill advancing in the completion step."""
        return [(last, s + self.num_uniform * c) for c, last, s in zip(self.chunks, self.last, self.starts) if last]


def _steps_nothing_starts(core: "EngineCore", num_decodes: int, prefills: _Prefills) -> int:
    """How many steps from now no waiting request can start in. schedule() tries none in a step
    whose decodes and prefills leave no token budget, or whose sequence slots are all taken
    (it puts the head of the queue back untouched: no side effect): so a run whose uniform
    steps leave no budget fuses whatever waits, up to the step where a prompt completes if
    that step leaves some. Otherwise the waiting must be proven blocked for the whole run
    (`_waiting_stays_blocked`), a scan of the queue, so it comes last."""
    sched = core.scheduler
    if not len(sched.waiting) or len(sched.running) >= sched.max_num_seqs:
        return _MAX_FUSED_STEPS
    left = sched.token_budget - num_decodes
    if left > sum(prefills.chunks):
        return _MAX_FUSED_STEPS if _waiting_stays_blocked(core) else 0
    if prefills.last is None or left <= sum(prefills.last) or _waiting_stays_blocked(core):
        return _MAX_FUSED_STEPS
    return prefills.num_uniform


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
    prefills: list[Request] = field(default_factory=list)  # in running order
    kv_tokens: int = 0  # KV tokens the decodes read
    max_steps: int = _MAX_FUSED_STEPS  # steps before the first decode reaches its output or context limit


def _split(running, prefilling: dict[str, Request], max_ctx: int, block_tokens: int) -> _Batch:
    """One pass over the running set (replay's hottest loop: properties inlined). A request with
    one token left to compute is a decode only once its prompt (or recompute) is done; a prompt
    one token short gets that token in the next step whatever the prefills ahead of it take
    (schedule() gives every one-token remainder its token with the decodes) and samples its
    first token there: no run (`max_steps` 0)."""
    batch = _Batch()
    decodes, slacks, prefills = batch.decodes, batch.slacks, batch.prefills
    kv_tokens, max_steps = 0, _MAX_FUSED_STEPS
    for r in running:
        num_output = len(r.output_token_ids)
        num_tokens = r.num_prompt_tokens + num_output
        left = num_tokens - r.num_computed_tokens
        if left != 1 or r.request_id in prefilling:
            if left == 1:  # a prompt one token short
                max_steps = 0
            prefills.append(r)
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


def _fit_blocks(core: "EngineCore", run: _Batch, prefills: _Prefills, k: int) -> int:
    """The largest number of steps (≤ k) whose block growth triggers no action and needs no
    eviction of live state: it stays within what the pool can allocate and below the next rung
    of the ladder (`_rung_room`)."""
    room = _rung_room(core)
    if room is None:
        return 0
    kv, limit = core.kv, min(core.pool.num_allocatable, room)
    if _growth(kv, run, prefills, k) <= limit:
        return k
    lo, hi = 0, k  # growth(lo) fits, growth(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _growth(kv, run, prefills, mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def _rung_room(core: "EngineCore") -> int | None:
    """How far live usage may rise in a run: to one block below the next rung (crossing any rung
    is a `watermark` event, even where the policy ignores it). None at or above the evict rung,
    where every step's start acts (evicts sessions, keeps the session tick, preempts): no run."""
    pool, marks = core.pool, core.marks
    live = pool.num_live
    if core.policy.watermarks and live >= marks.evict:
        return None
    above = [mark for mark in marks.thresholds if mark > live]
    return above[0] - live - 1 if above else pool.num_blocks - live


def _growth(kv: "KVCacheManager", run: _Batch, prefills: _Prefills, steps: int) -> int:
    """New blocks the first `steps` steps of the run allocate."""
    bt = kv.block_tokens
    blocks = sum([-((slack - steps) // bt) for slack in run.slacks if slack < steps])
    return blocks + sum(map(kv.new_blocks_needed, prefills.requests, prefills.tokens(steps)))
