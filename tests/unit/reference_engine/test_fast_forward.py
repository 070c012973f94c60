"""Fast-forwarded decode steps give exactly the results of stepping one by one."""

import random

import pytest

from tests.helpers import Driver, small_config


def workload(seed: int):
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(40):
        t += rng.expovariate(4.0)
        out.append((t, rng.choice(["acme", "globex", "batchco"]), rng.randint(20, 600), rng.randint(1, 300),
                    rng.choice([None, [123_000 + j for j in range(48)]])))
    return out


def replay(seed: int, fast: bool, **overrides):
    d = Driver(small_config(512, overrides={"engine.max_num_seqs": 6, "engine.max_num_batched_tokens": 128,
                                            "tenants.acme.max_kv_share": 0.5, "tenants.globex.max_kv_share": 0.5,
                                            **overrides}))
    arrivals = workload(seed)
    results, i, steps = {}, 0, 0
    while i < len(arrivals) or d.core.has_work():
        while i < len(arrivals) and arrivals[i][0] <= d.clock.now():
            _, tenant, prompt, max_new, head = arrivals[i]
            ids = (head or []) + [10_000 * (i + 1) + j for j in range(prompt)]
            try:
                r = d.core.add_request(tenant=tenant, prompt_token_ids=ids, max_new_tokens=max_new,
                                       request_id=f"r{i}")
                results[r.request_id] = r
            except Exception as err:  # noqa: BLE001 - the rejection itself is the result
                results[f"r{i}"] = type(err).__name__
            i += 1
        nxt = arrivals[i][0] if i < len(arrivals) else float("inf")
        out = d.core.step(until_s=nxt if fast else None)
        steps += 1
        d.clock.advance_to(out.t_end_s if not out.idle else min(nxt, d.core.next_timer_s() or nxt))
    summary = {rid: r if isinstance(r, str) else
               (r.finish_reason, r.first_token_s, r.finish_s, tuple(r.output_token_ids), r.num_prefix_hit_tokens,
                r.num_preemptions) for rid, r in results.items()}
    pool = d.core.pool  # the final split of cached and free blocks shows where each release went
    summary["pool"] = (pool.num_cached, pool.num_free, pool.num_evicted_cached, pool.num_prefix_hits)
    kinds = sorted((e.kind.value, e.request_id, round(e.t_s, 9)) for e in d.core.events)
    gpu_s = {rid: r.gpu_time_s for rid, r in results.items() if not isinstance(r, str)}
    return summary, kinds, (d.core.num_steps, d.core.num_computed_tokens), steps, gpu_s


def test_fast_forward_equals_step_by_step():
    for seed in range(3):
        slow, slow_events, slow_steps, slow_calls, slow_gpu_s = replay(seed, fast=False)
        fast, fast_events, fast_steps, fast_calls, fast_gpu_s = replay(seed, fast=True)
        assert fast == slow
        assert fast_events == slow_events
        assert fast_steps == slow_steps  # the same engine steps computing the same tokens, in fewer calls
        assert fast_calls < slow_calls
        # each request's share of GPU time: summed per step or per run, equal up to rounding
        assert fast_gpu_s == pytest.approx(slow_gpu_s, rel=1e-9) and sum(slow_gpu_s.values()) > 0


def test_fused_runs_cover_several_prefills_and_the_step_that_completes_one(monkeypatch):
    """The equality above holds where it matters: runs with several prefills in flight, ending in
    the step where one completes and leaves its budget to the next (the serial hand-over)."""
    from reference_engine.core import fast_forward as ff

    seen = {"several": 0, "hand_over": 0}
    last_chunks = ff._Prefills.last_chunks  # called only for a run that includes a completion step

    def spy(self):
        if len(self.requests) > 1:
            seen["several"] += 1
            seen["hand_over"] += any(last > c for c, last in zip(self.chunks, self.last))
        return last_chunks(self)

    monkeypatch.setattr(ff._Prefills, "last_chunks", spy)
    for seed in range(3):
        replay(seed, fast=True)
    assert seen["several"] and seen["hand_over"], seen


@pytest.mark.parametrize("policy", ["none", "vllm_like"])
def test_without_admission_runs_fuse_while_requests_wait_for_budget(monkeypatch, policy):
    """No admission control: nothing proves a waiting request over its limit, but a step whose
    prefill takes the whole budget (no long-prefill cap, as in vLLM) tries nobody, so runs fuse
    with requests waiting, and the results still equal stepping one by one."""
    from reference_engine.core import fast_forward as ff

    fused_while_waiting = []
    steps_nothing_starts = ff._steps_nothing_starts

    def spy(core, num_decodes, prefills):
        k = steps_nothing_starts(core, num_decodes, prefills)
        if k > 1 and len(core.scheduler.waiting):
            fused_while_waiting.append(k)
        return k

    monkeypatch.setattr(ff, "_steps_nothing_starts", spy)
    overrides = {"kv_cache.policy": policy, "engine.long_prefill_token_threshold": 0}
    for seed in range(3):
        slow, slow_events, slow_steps, _, _ = replay(seed, fast=False, **overrides)
        fast, fast_events, fast_steps, _, _ = replay(seed, fast=True, **overrides)
        assert (fast, fast_events, fast_steps) == (slow, slow_events, slow_steps)
    assert fused_while_waiting


def test_streamingllm_runs_fuse_with_their_compactions_inside(monkeypatch):
    """Runs of a token-level policy fuse with each request's compactions applied inside them in
    step order: decodes and prefills, first compactions (hashed blocks unregistered and
    released) included; the prompts here are token ids, so the outputs' blocks are hashed too."""
    from reference_engine.core import fast_forward as ff

    fuse, inside = ff._fuse_compacting, {"runs": 0, "first": 0, "with_prefill": 0}

    def spy(core, *args):
        approximate = {rid for rid, r in core.scheduler.running.items() if r.approximate}
        prefilling = bool(core.scheduler.prefilling)
        out = fuse(core, *args)
        if out is not None:
            inside["runs"] += 1
            inside["with_prefill"] += prefilling
            inside["first"] += sum(1 for rid, r in core.scheduler.running.items()
                                   if r.approximate and rid not in approximate)
        return out

    monkeypatch.setattr(ff, "_fuse_compacting", spy)
    overrides = {"kv_cache.policy": "streamingllm", "streamingllm.sink_tokens": 16, "streamingllm.sliding_window_tokens": 48}
    for seed in range(3):
        slow, slow_events, slow_steps, slow_calls, slow_gpu_s = replay(seed, fast=False, **overrides)
        fast, fast_events, fast_steps, fast_calls, fast_gpu_s = replay(seed, fast=True, **overrides)
        assert (fast, fast_events, fast_steps) == (slow, slow_events, slow_steps)
        assert fast_gpu_s == pytest.approx(slow_gpu_s, rel=1e-9) and fast_calls < slow_calls
        assert any(kind == "approximated" for kind, _, _ in fast_events)
    assert inside["runs"] > 10 and inside["first"] > 0 and inside["with_prefill"] > 0, inside


def test_an_index_whose_evictions_depend_on_time_is_asked_at_each_steps_time(monkeypatch):
    """multi_queue demotes by age when asked for victims: a fused run must then evict at the
    times and in the order stepping one by one does, not all at the run's start."""
    from reference_engine.policies import lru
    from reference_engine.policies.lru_queue import LruQueueIndex

    pops: list[tuple[float, int]] = []

    class TimedIndex(LruQueueIndex):
        evictions_depend_on_time = True

        def pop_victims(self, num_blocks, now_s, *, strict=False):
            pops.append((now_s, num_blocks))
            return super().pop_victims(num_blocks, now_s, strict=strict)

    monkeypatch.setattr(lru, "LruQueueIndex", TimedIndex)
    timelines = []
    for fast in (False, True):
        pops.clear()
        replay(1, fast)
        timelines.append(list(pops))
    slow, fast = timelines
    assert len(slow) > 20 and fast == slow


def test_a_prompt_one_token_short_gets_its_first_token_from_the_next_step():
    """A chunk that leaves one prompt token does not make a decode: the next step computes that
    token and samples the first one, so it ends a fused run (a run that took it for a decode
    stamped the first token at the run's end)."""
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
    take, and no run fuses past that step. (Found by replaying the Mooncake trace under h2o: a
    run planned the remainder a chunk of 0 behind a 26K-token prompt and went on without it.)"""
    results = []
    for fast in (False, True):
        d = Driver(small_config(2048, overrides={"engine.max_num_batched_tokens": 128, "engine.long_prefill_token_threshold": 32,
                                                 "tenants.acme.max_kv_share": 1.0}))
        # both prefill 32 tokens a step while the third waits; once it starts, nothing waits and
        # the first prefill may take the whole budget, with the second one token short
        requests = [d.add(prompt_len=1000, max_new=20), d.add(prompt_len=129, max_new=20)]
        d.step()
        requests.append(d.add(prompt_len=40, max_new=20))
        d.run(fast=fast)
        results.append(([(r.first_token_s, r.finish_s) for r in requests], d.core.num_steps))
    assert results[0] == results[1]


def test_the_saw_tooth_jumps_to_what_stepping_one_by_one_finds():
    """`_saw_tooth` (from event to event) against the obvious step-by-step loop, which asks the
    rule before each step whether that step compacts: streamingllm's window, h2o's heavy hitters."""
    from reference_engine.core.fast_forward import _saw_tooth
    from reference_engine.policies.h2o import H2oCompressor, HeavyHitterRule
    from reference_engine.policies.streamingllm import WindowRule

    def one_by_one(n, computed, blocks, bt, chunk, rule, num_steps):
        growth, compactions = [], []
        for step in range(1, num_steps + 1):
            compaction = rule.next_compaction(n, computed, chunk, 1)
            n, computed = n + chunk, computed + chunk
            if n > blocks * bt:
                growth.append((step, -(-n // bt) - blocks))
                blocks = -(-n // bt)
            if compaction is not None:
                kept = compaction[1]
                compactions.append((step, n - kept, blocks - -(-kept // bt), kept))
                n, blocks = kept, -(-kept // bt)
        return growth, compactions

    rng = random.Random(5)
    for _ in range(500):
        bt, chunk = 16, rng.choice([1, 1, 3, 16, 40, 256])
        if rng.random() < 0.5:
            kept = rng.randint(20, 300)
            rule = WindowRule(kept + rng.choice([bt, 2 * bt, 37]), kept)
        else:
            h2o = H2oCompressor(heavy_hitter_ratio=rng.choice([0.05, 0.2, 0.5]), recent_tokens=rng.randint(16, 200),
                                score_decay=0.98, min_tokens=rng.randint(16, 600), block_tokens=bt)
            rule = HeavyHitterRule(h2o, rng.randint(0, 64))
        n = rng.randint(1, 800)
        args = (n, n + rng.randint(0, 2000), -(-n // bt), bt, chunk, rule, rng.randint(1, 120))
        assert _saw_tooth(*args) == one_by_one(*args), args
