"""EngineCore behaviours the rest of kvgate stands on."""

from typing import Any

import pytest

from reference_engine import CapacityError, EventKind, FinishReason, RequestState
from tests.helpers import Driver, small_config


def kinds(core, kind):
    return [e for e in core.events if e.kind is kind]


def test_request_runs_to_completion_and_releases_its_blocks(driver):
    r = driver.add(prompt_len=100, max_new=20)
    driver.run()
    assert r.finish_reason is FinishReason.LENGTH and r.num_output_tokens == 20
    assert driver.core.pool.num_live == 0
    assert driver.core.num_computed_tokens == 100 + 19  # the prompt, then the KV of each output but the last
    [ft] = kinds(driver.core, EventKind.FIRST_TOKEN)
    assert ft.latency_s == pytest.approx(r.first_token_s - r.arrival_s)
    driver.core.pool.check_invariants()


def test_cancel_frees_blocks_in_the_same_step(driver):
    r = driver.add(prompt_len=200, max_new=100)
    for _ in range(3):
        driver.step()
    assert r.block_ids and driver.core.pool.num_live > 0
    assert driver.core.abort(r.request_id)
    assert driver.core.pool.num_live == 0 and r.finish_reason is FinishReason.CANCELLED
    [rel] = [e for e in kinds(driver.core, EventKind.BLOCKS_RELEASED) if e.reason == "cancelled"]
    assert rel.latency_s == 0.0 and rel.num_blocks > 0


def test_abort_during_a_step_in_flight_is_deferred_to_its_end(driver):
    r = driver.add(prompt_len=200, max_new=100)
    driver.step()
    step = driver.core.begin_step()
    driver.clock.advance(step.t_end_s - step.t_start_s)  # the step runs for real
    driver.core.abort(r.request_id)
    assert r.block_ids, "blocks must not be freed while the step still reads them"
    driver.core.end_step()
    assert driver.core.pool.num_live == 0 and r.is_finished


def test_a_step_given_an_earlier_start_starts_there_but_never_before_a_logged_event(driver):
    driver.add(prompt_len=200, max_new=100)
    first = driver.core.begin_step()
    driver.clock.advance(first.t_end_s - first.t_start_s + 0.004)  # the loop woke 4 ms late
    driver.core.end_step()
    second = driver.core.begin_step(start_s=first.t_end_s)
    assert second.t_start_s == first.t_end_s
    driver.clock.advance(second.t_end_s - second.t_start_s + 0.001)
    driver.core.end_step()
    driver.clock.advance(0.002)
    late = driver.add(prompt_len=50, max_new=4)  # logged after the last step's end
    third = driver.core.begin_step(start_s=second.t_end_s)
    assert third.t_start_s == late.arrival_s == driver.clock.now() > second.t_end_s


def test_prefix_hit_reuses_blocks_of_an_earlier_request(driver):
    ids = list(range(5000, 5000 + 160))
    a = driver.add(prompt_token_ids=ids, max_new=4)
    driver.run()
    b = driver.add(prompt_token_ids=ids + [7, 8, 9], max_new=4)
    driver.run()
    # 160 prompt tokens = 10 full blocks; all cached from the first request
    assert a.num_prefix_hit_tokens == 0 and b.num_prefix_hit_tokens == 160


def test_tenants_never_share_private_blocks(driver):
    ids = list(range(5000, 5000 + 160))
    driver.add(tenant="acme", prompt_token_ids=ids, max_new=4)
    driver.run()
    other = driver.add(tenant="globex", prompt_token_ids=ids, max_new=4)
    driver.run()
    assert other.num_prefix_hit_tokens == 0


def test_public_prefix_is_shared_across_tenants():
    cfg = small_config(overrides={"prefix_cache.public_prefixes": [{"name": "sys", "text": " ".join(["pub"] * 64)}]})
    d = Driver(cfg)
    public = d.core.tokenizer.encode(" ".join(["pub"] * 64))
    d.add(tenant="acme", prompt_token_ids=public + list(range(9000, 9040)), max_new=4)
    d.run()
    other = d.add(tenant="globex", prompt_token_ids=public + list(range(9100, 9140)), max_new=4)
    d.run()
    assert other.num_prefix_hit_tokens == 64  # the 4 public blocks, nothing private


def tight_pool(mode: str, aging_s: float = 10, **more: Any) -> Driver:
    """128 blocks, admission off: six requests that each grow to 20 blocks must preempt.
    (Each tenant's worst-case reservations must stay under its cap, so the six are split.)
    `more`: further config overrides (`a__b` = key `a.b`)."""
    return Driver(
        small_config(
            128,
            **more,
            overrides={
                "preemption.aging_s": aging_s,
                "engine.max_num_batched_tokens": 64,
                "engine.max_num_seqs": 6,
                "admission.enabled": False,
                "preemption.mode": mode,
                "tenants.acme.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                "kv_cache.guard": {
                    "warn_at_percent": 30,
                    "admission_at_percent": 40,
                    "evict_at_percent": 50,
                    "pause_batch_prefill_at_percent": 60,
                    "preempt_at_percent": 90,
                    "reject_at_percent": 99,
                },
            },
        )
    )


def test_preempted_request_resumes_and_completes_all_its_tokens():
    d = tight_pool("recompute")
    reqs = [d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220) for i in range(6)]
    d.run()
    assert kinds(d.core, EventKind.PREEMPTED), "the scenario must force a preemption"
    assert all(e.mode == "recompute" for e in kinds(d.core, EventKind.PREEMPTED))
    for r in reqs:
        assert r.finish_reason is FinishReason.LENGTH and r.num_output_tokens == 220
    assert d.core.pool.num_live == 0
    d.core.pool.check_invariants()


def test_a_recompute_preemption_says_how_many_computed_tokens_it_discards():
    d = tight_pool("recompute")
    reqs = [d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220) for i in range(6)]
    d.run()
    discarded = sum(e.num_tokens for e in kinds(d.core, EventKind.PREEMPTED))
    assert discarded == d.core.scheduler.recompute_tokens == sum(r.recompute_tokens for r in reqs) > 0
    # computed again on top of the uninterrupted work, less what the prefix cache gave back on resume
    uninterrupted = sum(100 + 220 - 1 for _ in reqs)
    assert uninterrupted < d.core.num_computed_tokens <= uninterrupted + discarded


def test_a_request_just_preempted_does_not_hold_back_the_chats_behind_it():
    # The victim ranks first by its whole wait, but right after the preemption it cannot fit:
    # a chat that can must not wait behind it (it would wait as long as the peak lasts).
    d = tight_pool("recompute", aging_s=0.5)
    for i in range(6):
        d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220)
    d.clock.advance(1.0)  # the growers arrived longer than aging_s ago
    for _ in range(10_000):
        if kinds(d.core, EventKind.PREEMPTED):
            break
        d.step()
    [victim] = [r for r in d.core.scheduler.requests.values() if r.state is RequestState.PREEMPTED]
    d.core.pool.allocate(d.core.pool.num_allocatable - 19, "acme", d.clock.now())  # too little room left for it
    chat = d.add(tenant="globex", prompt_len=5, max_new=2)
    d.step()
    assert victim.state is RequestState.PREEMPTED and chat.state is not RequestState.WAITING


def test_recompute_gives_the_same_tokens_as_an_uninterrupted_run():
    d = tight_pool("recompute")
    reqs = [d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220, request_id=f"r{i}") for i in range(6)]
    d.run()
    victim = next(r for r in reqs if r.num_preemptions)  # the scenario forces at least one
    alone = Driver(small_config())
    ref = alone.add(
        prompt_len=100, max_new=220, request_id=victim.request_id, prompt_token_ids=list(victim.prompt_token_ids)
    )
    alone.run()
    assert victim.output_token_ids == ref.output_token_ids


def test_a_recompute_restart_loads_its_evicted_prefix_from_the_tiers():
    """A request preempted by recompute comes back like a first start: GPU hits, then what the
    pool demoted meanwhile, loaded from the host tier instead of recomputed. Its answer is the
    same, and its prompt's cached tokens are still those of its first start."""
    d = tight_pool("recompute", tiers__host_gib=1.0)
    for i in range(6):
        d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220, request_id=f"r{i}")
    while not kinds(d.core, EventKind.PREEMPTED):
        d.step()
    [victim] = [r for r in d.core.scheduler.requests.values() if r.state is RequestState.PREEMPTED]
    first_hits = victim.num_prefix_hit_tokens
    pool = d.core.pool
    pool.evict_cached(pool.num_cached, d.clock.now())  # while it waits its prefix leaves the pool: demoted
    d.run()
    loads = [e for e in kinds(d.core, EventKind.TIER_LOAD) if e.request_id == victim.request_id]
    assert [(e.mode, e.reason) for e in loads][:1] == [("host", "ok")] and loads[0].num_blocks >= 6
    resumed = [e for e in kinds(d.core, EventKind.RESUMED) if e.request_id == victim.request_id]
    assert resumed[0].t_s <= loads[0].t_s and victim.num_prefix_hit_tokens == first_hits
    alone = Driver(small_config())
    ref = alone.add(
        prompt_len=100, max_new=220, request_id=victim.request_id, prompt_token_ids=list(victim.prompt_token_ids)
    )
    alone.run()
    assert victim.output_token_ids == ref.output_token_ids and victim.num_output_tokens == 220
    assert d.core.pool.num_live == 0 and not d.core.scheduler.loads


def test_swap_preemption_brings_the_request_back():
    d = tight_pool("swap")
    reqs = [d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220) for i in range(6)]
    d.run()
    assert kinds(d.core, EventKind.SWAPPED)
    assert {e.num_tokens for e in kinds(d.core, EventKind.PREEMPTED)} == {0}  # nothing computed again
    assert all(r.num_output_tokens == 220 for r in reqs)
    assert d.core.host.used_bytes == 0
    d.core.pool.check_invariants()


def test_tenant_at_its_cap_is_refused_while_others_proceed():
    d = Driver(small_config(1024, overrides={"tenants.acme.max_kv_share": 0.10}))
    # cap: floor(0.10 × 1,024) = 102 blocks; each request reserves ceil((500 + 64) × 1.1 / 16) = 39
    d.add(tenant="acme", prompt_len=500, max_new=64)
    d.add(tenant="acme", prompt_len=500, max_new=64)
    with pytest.raises(CapacityError) as err:
        d.add(tenant="acme", prompt_len=500, max_new=64)
    assert err.value.code == "tenant_quota" and err.value.retry_after_s
    ok = d.add(tenant="globex", prompt_len=500, max_new=64)
    d.run()
    assert ok.finish_reason is FinishReason.LENGTH
    [refused] = kinds(d.core, EventKind.REJECTED)
    assert (refused.reason, refused.mode, refused.num_blocks) == ("tenant_quota", "kv_share", 39)
    assert refused.tenant_live_blocks == 0  # acme's live blocks: 78 reserved, none computed yet


def test_a_tenant_quota_names_the_limit_behind_it():
    d = Driver(small_config(1024, overrides={"tenants.acme.max_active_seqs": 1}))
    d.add(tenant="acme", prompt_len=500, max_new=64)
    with pytest.raises(CapacityError) as err:
        d.add(tenant="acme", prompt_len=100, max_new=8)
    assert (err.value.code, err.value.limit) == ("tenant_quota", "active_seqs")
    assert [e.mode for e in kinds(d.core, EventKind.REJECTED)] == ["active_seqs"]


def test_overload_without_admission_produces_oom_events():
    d = Driver(
        small_config(
            64, overrides={"kv_cache.policy": "none", "engine.max_num_seqs": 8, "engine.max_num_batched_tokens": 512}
        )
    )
    for _ in range(6):
        d.add(prompt_len=200, max_new=200)
    d.run()
    assert kinds(d.core, EventKind.OOM), "no admission + overload must hit OOM"
    assert any(e.reason == "oom" for e in kinds(d.core, EventKind.FINISHED))
    assert d.core.pool.num_live == 0  # the engine survived and released everything
    d.core.pool.check_invariants()


def test_queued_request_past_its_deadline_is_rejected_with_queue_deadline():
    d = Driver(
        small_config(
            256,
            overrides={
                "admission.queue_deadline_ms": 50,
                "tenants.acme.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                "engine.max_num_batched_tokens": 64,
                "engine.max_num_seqs": 1,
            },
        )
    )
    # one running sequence at a time: the second request cannot start within 50 ms
    first = d.add(tenant="acme", prompt_len=1200, max_new=64)
    late = d.add(tenant="globex", prompt_len=100, max_new=8)
    d.run()
    assert late.finish_reason is FinishReason.REJECTED and late.finish_detail == "queue_deadline"
    assert first.finish_reason is FinishReason.LENGTH
    assert [e.reason for e in kinds(d.core, EventKind.REJECTED)] == ["queue_deadline"]


def test_batch_prefill_pauses_above_its_watermark():
    d = Driver(small_config(1024, overrides={"tenants.acme.max_kv_share": 1.0}))
    # hold 89 % of the pool with retained state (a pinned-like hold), above pause_batch (88 %)
    held = d.core.pool.allocate(912, "acme", 0.0)
    batch = d.add(tenant="batchco", prompt_len=50, max_new=4)
    assert d.core.step().idle and batch.state is RequestState.WAITING
    d.core.pool.decref(held, 0.0)
    d.run()
    assert batch.finish_reason is FinishReason.LENGTH


def test_a_batch_job_held_out_of_the_interactive_reserve_never_blocks_chats_behind_it():
    # 78 % of the pool is held: a batch job may not start (it never takes the last 25 %), and it
    # waits long enough to rank ahead of new chats. It must not hold them back: they may use the
    # band it may not, and stalling them would not free anything for it.
    d = Driver(small_config(1024, overrides={"tenants.acme.max_kv_share": 1.0, "tenants.batchco.max_kv_share": 1.0}))
    held = d.core.pool.allocate(800, "acme", 0.0)
    batch = d.add(tenant="batchco", prompt_len=50, max_new=4)
    d.clock.advance(d.core.config.preemption.aging_s + 1)
    chat = d.add(tenant="globex", prompt_len=20, max_new=2)
    d.step()
    assert batch.state is RequestState.WAITING and chat.state is RequestState.RUNNING
    d.core.pool.decref(held, d.clock.now())
    d.run()
    assert batch.finish_reason is FinishReason.LENGTH and chat.finish_reason is FinishReason.LENGTH


def test_a_batch_job_that_cannot_start_keeps_no_blocks_promised():
    # Admitted while the pool was empty, the batch job finds it above its class limit at its
    # first chance to start: its promise lapses, and a chat that fits only without it starts.
    d = Driver(
        small_config(
            1024,
            overrides={
                "tenants.acme.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                "tenants.batchco.max_kv_share": 1.0,
            },
        )
    )
    batch = d.add(tenant="batchco", prompt_len=1500, max_new=100)
    assert d.core.scheduler.pending_blocks == batch.estimated_blocks > 100
    d.core.pool.allocate(800, "acme", 0.0)  # 78 %: above what batch may use, before its first step
    d.step()
    assert batch.state is RequestState.WAITING and d.core.scheduler.pending_blocks == 0
    chat = d.add(tenant="globex", prompt_len=600, max_new=16)  # 800 + 42 + the batch's 110 > 92 %
    d.step()
    assert chat.state is not RequestState.WAITING


def test_a_chat_request_expires_on_its_own_deadline_behind_a_batch_job_with_a_longer_one():
    d = Driver(
        small_config(
            1024,
            overrides={
                "tenants.acme.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                "tenants.batchco.max_kv_share": 1.0,
            },
        )
    )
    held = d.core.pool.allocate(900, "acme", 0.0)  # neither request below fits
    batch = d.add(tenant="batchco", prompt_len=800, max_new=4)
    chat = d.add(tenant="globex", prompt_len=800, max_new=4)
    deadlines = d.core.config.admission
    d.clock.advance(deadlines.queue_deadline_ms / 1000 + 1)
    d.step()
    assert chat.finish_reason is FinishReason.REJECTED and batch.state is RequestState.WAITING
    assert d.core.next_timer_s() == pytest.approx(deadlines.batch_queue_deadline_ms / 1000)
    d.core.pool.decref(held, d.clock.now())


def test_a_short_prompt_started_behind_long_ones_is_not_served_after_them():
    # A burst: two 20K-token prompts and a 700-token one arrive together. The short one starts
    # on the step's last scraps, behind the long ones; once nothing waits, served strictly in
    # the order they started, it would get no budget until both long prompts were done.
    d = Driver(
        small_config(
            8192,
            overrides={
                "tenants.acme.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                "engine.max_num_batched_tokens": 1024,
            },
        )
    )
    longs = [d.add(prompt_len=20_000, max_new=4), d.add(tenant="globex", prompt_len=20_000, max_new=4)]
    chat = d.add(tenant="globex", prompt_len=700, max_new=4)
    for _ in range(6):
        d.step()
    assert chat.first_token_s is not None and all(r.first_token_s is None for r in longs)
    d.run()
    assert all(r.finish_reason is FinishReason.LENGTH for r in [*longs, chat])


def test_priority_header_cannot_exist_priority_comes_from_the_tenant(driver):
    r = driver.add(tenant="batchco", prompt_len=10, max_new=2)
    assert r.traffic_class.value == "batch"


def test_kill_mode_aborts_the_victim_with_an_explicit_reason():
    d = tight_pool("kill")
    reqs = [d.add(tenant=("acme", "globex")[i % 2], prompt_len=100, max_new=220) for i in range(6)]
    d.run()
    killed = [r for r in reqs if r.finish_reason is FinishReason.PREEMPTED]
    assert killed and all(e.mode == "kill" for e in kinds(d.core, EventKind.PREEMPTED))
    assert all(r.finish_reason in (FinishReason.PREEMPTED, FinishReason.LENGTH) for r in reqs)
    assert d.core.pool.num_live == 0
    d.core.pool.check_invariants()


def test_a_long_prefill_yields_budget_to_a_waiting_short_request():
    d = Driver(
        small_config(
            overrides={
                "engine.max_num_batched_tokens": 256,
                "engine.long_prefill_token_threshold": 64,
                "tenants.acme.max_kv_share": 1.0,
            }
        )
    )
    long = d.add(prompt_len=4000, max_new=4)
    d.step()  # the long prompt alone: the whole budget
    assert long.num_computed_tokens == 256
    short = d.add(tenant="globex", prompt_len=50, max_new=4)
    d.step()  # someone is waiting: the long chunk is capped, the short prompt starts at once
    assert long.num_computed_tokens == 256 + 64 and short.first_token_s is not None


def test_long_prefills_together_leave_a_chunk_for_a_waiting_short_request():
    # Four long prompts in flight, each capped at 64 tokens while someone waits, would take the
    # whole 256-token budget; together they leave one chunk's worth, so the short one starts.
    d = Driver(
        small_config(
            4096,
            overrides={
                "engine.max_num_batched_tokens": 256,
                "engine.long_prefill_token_threshold": 64,
                "tenants.acme.max_kv_share": 1.0,
            },
        )
    )
    longs = [d.add(prompt_len=4000, max_new=4) for _ in range(4)]
    while not all(r.num_computed_tokens for r in longs):
        d.step()
    short = d.add(tenant="globex", prompt_len=50, max_new=4)
    before = sum(r.num_computed_tokens for r in longs)
    d.step()
    assert short.first_token_s is not None
    assert sum(r.num_computed_tokens for r in longs) - before <= 256 - 64


def test_the_batch_share_reaches_batch_behind_a_long_interactive_queue():
    # More interactive requests wait than one step tries (16); the batch share (20 % of 256 tokens)
    # must still go to the batch request behind them all, or a steady queue starves batch.
    d = Driver(
        small_config(
            4096,
            overrides={
                "engine.max_num_batched_tokens": 256,
                "engine.max_num_seqs": 64,
                "preemption.min_batch_token_share": 0.2,
            },
        )
    )
    for i in range(30):
        d.add(tenant=("acme", "globex")[i % 2], prompt_len=200, max_new=4)
    batch = d.add(tenant="batchco", prompt_len=100, max_new=4)
    d.step()
    assert batch.num_computed_tokens == int(256 * 0.2)


def test_a_chat_sized_prompt_starts_whole_not_on_the_last_scraps_of_a_step():
    # Long prefills leave 128 tokens of a 256-token step to the waiting; the first 100-token
    # question takes 100, and the second would start on the 28 left and then queue its rest
    # behind the long prefills (which take the whole budget once nobody waits). It waits a step
    # instead and starts whole.
    d = Driver(
        small_config(
            4096,
            overrides={
                "engine.max_num_batched_tokens": 256,
                "engine.long_prefill_token_threshold": 128,
                "tenants.acme.max_kv_share": 1.0,
            },
        )
    )
    longs = [d.add(prompt_len=4000, max_new=4) for _ in range(4)]
    while not all(r.num_computed_tokens for r in longs):
        d.step()
    first, second = (d.add(tenant="globex", prompt_len=100, max_new=4) for _ in range(2))
    d.step()
    assert first.first_token_s is not None and second.num_computed_tokens == 0
    d.step()
    assert second.first_token_s is not None
