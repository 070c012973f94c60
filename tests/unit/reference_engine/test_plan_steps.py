"""A plan that holds for several steps gives exactly the results of stepping one by one."""

import random

import pytest

from reference_engine.core.block_pool import BlockPool
from reference_engine.core.scheduler import Scheduler
from tests.helpers import Driver, small_config


def spy_plans(monkeypatch, note):
    """Call `note(scheduler, plan, outcome)` before each plan of several steps is applied."""
    update = Scheduler.update

    def spy(self, plan, outcome, *args):
        if outcome.num_steps > 1:
            note(self, plan, outcome)
        return update(self, plan, outcome, *args)

    monkeypatch.setattr(Scheduler, "update", spy)


def prefill_driver(budget: int, cap: int) -> Driver:
    """A 2,048-block engine for prefills racing under a token budget and a long-prefill cap,
    one tenant free to use the whole pool."""
    return Driver(
        small_config(
            2048,
            overrides={
                "engine.max_num_batched_tokens": budget,
                "engine.long_prefill_token_threshold": cap,
                "tenants.acme.max_kv_share": 1.0,
            },
        )
    )


def workload(seed: int):
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(40):
        t += rng.expovariate(4.0)
        out.append(
            (
                t,
                rng.choice(["acme", "globex", "batchco"]),
                rng.randint(20, 600),
                rng.randint(1, 300),
                rng.choice([None, [123_000 + j for j in range(48)]]),
            )
        )
    return out


def replay(seed: int, fast: bool, **overrides):
    d = Driver(
        small_config(
            512,
            overrides={
                "engine.max_num_seqs": 6,
                "engine.max_num_batched_tokens": 128,
                "tenants.acme.max_kv_share": 0.5,
                "tenants.globex.max_kv_share": 0.5,
                **overrides,
            },
        )
    )
    arrivals = workload(seed)
    results, i, steps = {}, 0, 0
    while i < len(arrivals) or d.core.has_work():
        while i < len(arrivals) and arrivals[i][0] <= d.clock.now():
            _, tenant, prompt, max_new, head = arrivals[i]
            ids = (head or []) + [10_000 * (i + 1) + j for j in range(prompt)]
            try:
                r = d.core.add_request(tenant=tenant, prompt_token_ids=ids, max_new_tokens=max_new, request_id=f"r{i}")
                results[r.request_id] = r
            except Exception as err:  # noqa: BLE001 - the rejection itself is the result
                results[f"r{i}"] = type(err).__name__
            i += 1
        nxt = arrivals[i][0] if i < len(arrivals) else float("inf")
        out = d.core.step(until_s=nxt if fast else None)
        steps += 1
        d.clock.advance_to(out.t_end_s if not out.idle else min(nxt, d.core.next_timer_s() or nxt))
    summary = {
        rid: r
        if isinstance(r, str)
        else (
            r.finish_reason,
            r.first_token_s,
            r.finish_s,
            tuple(r.output_token_ids),
            r.num_prefix_hit_tokens,
            r.num_preemptions,
        )
        for rid, r in results.items()
    }
    pool = d.core.pool  # the final split of cached and free blocks shows where each release went
    summary["pool"] = (pool.num_cached, pool.num_free, pool.num_evicted_cached, pool.num_prefix_hits)
    kinds = sorted((e.kind.value, e.request_id, round(e.t_s, 9)) for e in d.core.events)
    gpu_s = {rid: r.gpu_time_s for rid, r in results.items() if not isinstance(r, str)}
    return summary, kinds, (d.core.num_steps, d.core.num_computed_tokens), steps, gpu_s


def test_plans_of_several_steps_equal_step_by_step():
    for seed in range(3):
        slow, slow_events, slow_steps, slow_calls, slow_gpu_s = replay(seed, fast=False)
        fast, fast_events, fast_steps, fast_calls, fast_gpu_s = replay(seed, fast=True)
        assert fast == slow
        assert fast_events == slow_events
        assert fast_steps == slow_steps  # the same engine steps computing the same tokens, in fewer calls
        assert fast_calls < slow_calls
        # each request's share of GPU time: summed per step or per run, equal up to rounding
        assert fast_gpu_s == pytest.approx(slow_gpu_s, rel=1e-9) and sum(slow_gpu_s.values()) > 0


def test_plans_hold_for_prefills_up_to_the_step_that_completes_one(monkeypatch):
    """The equality above holds where it matters: plans with prefills in flight beside the
    decodes, up to the step where one completes its prompt (it samples its first token at the
    plan's end)."""
    seen = {"prefilling": 0, "completes": 0}

    def note(sched, plan, outcome):
        prefills = [(c, tokens) for c, tokens in zip(plan.chunks, outcome.sampled) if c.num_new_tokens > 1]
        seen["prefilling"] += bool(prefills) and len(prefills) < len(plan.chunks)
        seen["completes"] += any(tokens for _, tokens in prefills)

    spy_plans(monkeypatch, note)
    for seed in range(3):
        replay(seed, fast=True)
    assert seen["prefilling"] and seen["completes"], seen


@pytest.mark.parametrize("policy", ["none", "vllm_like"])
def test_without_admission_plans_hold_while_requests_wait_for_budget(monkeypatch, policy):
    """No admission control: nothing proves a waiting request over its limit, but a step whose
    prefill takes the whole budget (no long-prefill cap, as in vLLM) tries nobody, so plans hold
    for several steps with requests waiting, and the results still equal stepping one by one."""
    held_while_waiting = []
    spy_plans(monkeypatch, lambda sched, plan, outcome: held_while_waiting.append(len(sched.waiting)))
    overrides = {"kv_cache.policy": policy, "engine.long_prefill_token_threshold": 0}
    for seed in range(3):
        slow, slow_events, slow_steps, _, _ = replay(seed, fast=False, **overrides)
        fast, fast_events, fast_steps, _, _ = replay(seed, fast=True, **overrides)
        assert (fast, fast_events, fast_steps) == (slow, slow_events, slow_steps)
    assert any(held_while_waiting)


def test_streamingllm_plans_hold_up_to_a_compaction(monkeypatch):
    """Plans of a token-level policy hold for several steps, up to the step in which a request
    compacts (first compactions included: hashed blocks unregistered and released); the
    prompts here are token ids, so the outputs' blocks are hashed too."""
    held = {"plans": 0, "compacting": 0}

    def note(sched, plan, outcome):
        held["plans"] += 1
        held["compacting"] += any(
            sched.policy.compressor.compaction_rule(c.request, 0).next_compaction(
                c.request.num_kv_tokens, c.request.num_computed_tokens, c.num_new_tokens, outcome.num_steps
            )
            is not None
            for c in plan.chunks
        )

    spy_plans(monkeypatch, note)
    overrides = {
        "kv_cache.policy": "streamingllm",
        "streamingllm.sink_tokens": 16,
        "streamingllm.sliding_window_tokens": 48,
    }
    for seed in range(3):
        slow, slow_events, slow_steps, slow_calls, slow_gpu_s = replay(seed, fast=False, **overrides)
        fast, fast_events, fast_steps, fast_calls, fast_gpu_s = replay(seed, fast=True, **overrides)
        assert (fast, fast_events, fast_steps) == (slow, slow_events, slow_steps)
        assert fast_gpu_s == pytest.approx(slow_gpu_s, rel=1e-9) and fast_calls < slow_calls
        assert any(kind == "approximated" for kind, _, _ in fast_events)
    assert held["plans"] > 10 and held["compacting"] > 0, held


def _pool_asks(monkeypatch, depends_on_time: bool) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """(time, blocks asked) of every eviction the pool asks its index for, stepping one by one
    and by plans (whose requests, events and steps must be the same), with an LRU index that
    says its victims do or do not depend on the time."""
    from reference_engine.policies import lru
    from reference_engine.policies.lru_queue import LruQueueIndex

    pops: list[tuple[float, int]] = []

    class TimedIndex(LruQueueIndex):
        victims_depend_on_time = depends_on_time

        def pop_victims(self, num_blocks, now_s, *, strict=False):
            pops.append((now_s, num_blocks))
            return super().pop_victims(num_blocks, now_s, strict=strict)

    monkeypatch.setattr(lru, "LruQueueIndex", TimedIndex)
    timelines, results = [], []
    for fast in (False, True):
        pops.clear()
        results.append(replay(1, fast)[:3])  # requests, events, steps
        timelines.append(list(pops))
    assert results[0] == results[1]
    return timelines[0], timelines[1]


def test_the_pool_is_asked_for_blocks_at_each_steps_time(monkeypatch):
    """multi_queue demotes by age when asked for victims: a plan of several steps must evict at
    the times and in the order stepping one by one does, not all at the plan's start."""
    slow, fast = _pool_asks(monkeypatch, depends_on_time=True)
    assert len(slow) > 20 and fast == slow


def test_an_index_whose_victims_ignore_the_time_is_asked_once_per_request(monkeypatch):
    """When the victims do not depend on the time, a plan's later steps grow each request in
    one call: fewer asks for as many blocks, and the same requests, events and steps."""
    slow, fast = _pool_asks(monkeypatch, depends_on_time=False)
    assert len(fast) < len(slow) and sum(n for _, n in fast) == sum(n for _, n in slow)


def test_a_prompt_one_token_short_gets_its_first_token_from_the_next_step():
    """A chunk that leaves one prompt token does not make a decode: the next step computes that
    token and samples the first one, so a plan holds for that step only (one that took it for
    a decode would stamp the first token at its end)."""
    results = []
    for fast in (False, True):
        d = Driver(small_config(512, overrides={"engine.max_num_seqs": 6, "engine.max_num_batched_tokens": 128}))
        r = d.add(prompt_len=129, max_new=40)  # 128 tokens in the first step, 1 left
        d.run(fast=fast)
        results.append((r.first_token_s, r.finish_s, d.core.num_steps))
    assert results[0] == results[1]


def test_a_prompt_one_token_short_gets_its_token_even_behind_a_prefill_that_takes_the_budget():
    """schedule() gives a one-token remainder its token with the decodes, before the prefills
    ahead of it in running order take the rest: so it completes in the next step whatever they
    take, and no plan holds past that step. (Found by replaying the Mooncake trace under h2o: a
    fused run once planned the remainder a chunk of 0 behind a 26K-token prompt.)"""
    results = []
    for fast in (False, True):
        d = prefill_driver(budget=128, cap=32)
        # both prefill 32 tokens a step while the third waits; once it starts, nothing waits and
        # the first prefill may take the whole budget, with the second one token short
        requests = [d.add(prompt_len=1000, max_new=20), d.add(prompt_len=129, max_new=20)]
        d.step()
        requests.append(d.add(prompt_len=40, max_new=20))
        d.run(fast=fast)
        results.append(([(r.first_token_s, r.finish_s) for r in requests], d.core.num_steps))
    assert results[0] == results[1]


def test_a_free_buffer_evicts_at_the_step_after_each_allocation(monkeypatch):
    """zones keeps a free buffer by evicting cached blocks at each step's start: a plan's later
    steps visit only the steps that allocate and the ones right after (the first included,
    after schedule()'s own allocations), and evict exactly when and what stepping does."""
    pops: list[tuple[float, int]] = []
    pool_evict = BlockPool.evict_cached

    def evict_cached(self, num, now_s):
        pops.append((now_s, num))
        return pool_evict(self, num, now_s)

    monkeypatch.setattr(BlockPool, "evict_cached", evict_cached)
    overrides = {"kv_cache.policy": "zones", "zones.free_buffer_percent": 10}
    timelines = []
    for fast in (False, True):
        pops.clear()
        slow_or_fast = replay(1, fast, **overrides)[:3]
        timelines.append((slow_or_fast, list(pops)))
    (slow, slow_pops), (fast, fast_pops) = timelines
    assert fast == slow and fast_pops == slow_pops and len(slow_pops) > 5


def test_two_prefills_of_one_prompt_publish_its_blocks_in_step_order():
    """Two requests computing the same prompt race for its blocks' hashes: the block that fills
    first keeps one. The request started second gets the larger chunks (each capped at 64, what
    is left to the shortest remainder first), overtakes the first and fills the later blocks
    first, so stepping one by one hands it their hashes, though it comes second in plan order;
    a plan of several steps must publish step by step to do the same."""
    prompt = [50_000 + i for i in range(1200)]
    outcomes = []
    for fast in (False, True):
        d = prefill_driver(budget=192, cap=64)
        d.add(prompt_token_ids=[*prompt, *range(60_000, 62_000)], max_new=4)  # the longer one
        d.step()  # the long prompt alone: 192 tokens
        short = d.add(prompt_token_ids=prompt, max_new=4)
        while not short.is_finished:
            d.step(float("inf") if fast else None)
        pool = d.core.pool  # the winner's blocks are hashed: the short prompt's go to the cache
        outcomes.append((short.finish_s, pool.num_cached, pool.num_free, d.core.num_steps))
    assert outcomes[0] == outcomes[1] and outcomes[0][1] > 0
