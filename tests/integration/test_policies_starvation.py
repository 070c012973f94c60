"""Starvation protection is the same under every policy: a low-priority request that keeps losing
to fresher, higher-priority work still runs (aging, the batch minimum share, the cap on
consecutive preemptions live in the scheduler, not in the policies)."""

import pytest

from reference_engine import FinishReason, Request, RequestError
from reference_engine.config import PolicyName, TrafficClass
from reference_engine.core.preemption import pick_victim
from reference_engine.policies.policy import VictimOrder
from tests.helpers import Driver, small_config

ALL = [p.value for p in PolicyName]
SPREAD_GUARD = {
    "warn_at_percent": 50,
    "admission_at_percent": 60,
    "evict_at_percent": 70,
    "pause_batch_prefill_at_percent": 80,
    "preempt_at_percent": 90,
    "reject_at_percent": 99,
}
STREAM_S = 120.0  # interactive work keeps arriving this long, always more than fits


def starving_batch_request(policy: str, num_blocks: int, interactive_prompt: int, batch_output: int = 60, **overrides):
    """Interactive requests run, then a batch request arrives, then interactive requests keep
    the queue full for STREAM_S virtual seconds. After the batch request finishes, the stream
    runs on until its next arrival (or its end), so that a test can see whether interactive work
    was still arriving then. Returns the driver, the batch request, the interactive requests and
    the most consecutive preemptions the batch request suffered."""
    d = Driver(
        small_config(
            num_blocks,
            overrides={
                "kv_cache.policy": policy,
                "kv_cache.guard": SPREAD_GUARD,
                "engine.max_num_seqs": 2,
                "engine.max_num_batched_tokens": 64,
                "preemption.aging_s": 2.0,
                "admission.queue_deadline_ms": 600_000,
                "tenants.acme.max_kv_share": 1.0,
                "tenants.batchco.max_kv_share": 1.0,
                "tenants.globex.max_kv_share": 1.0,
                **overrides,
            },
        )
    )
    interactive = []

    def top_up() -> None:
        while sum(not r.is_finished for r in interactive) < 4 and d.clock.now() < STREAM_S:
            try:
                interactive.append(
                    d.add(
                        tenant="acme" if len(interactive) % 2 else "globex", prompt_len=interactive_prompt, max_new=40
                    )
                )
            except RequestError:
                return

    top_up()
    d.step()
    low = d.add(tenant="batchco", prompt_len=300, max_new=batch_output)
    worst = 0
    for _ in range(200_000):
        if low.is_finished:
            break
        top_up()
        d.step()
        worst = max(worst, low.consecutive_preemptions)
    while low.is_finished and d.clock.now() < STREAM_S:
        top_up()
        if arrived_after(low, interactive):
            break
        d.step()
    return d, low, interactive, worst


def arrived_after(low: Request, interactive: list[Request]) -> bool:
    """Whether an interactive request arrived once `low` had finished: it ran within the stream."""
    assert low.finish_s is not None
    return any(r.arrival_s >= low.finish_s for r in interactive)


@pytest.mark.parametrize("policy", ALL)
def test_a_low_priority_request_behind_a_stream_of_interactive_work_runs(policy):
    _, low, interactive, _ = starving_batch_request(policy, 512, interactive_prompt=200)
    assert low.finish_reason is FinishReason.LENGTH
    assert arrived_after(low, interactive)  # it ran while interactive work kept coming, not after


@pytest.mark.parametrize("policy", [p for p in ALL if p != "none"])
def test_a_low_priority_request_under_memory_pressure_is_not_preempted_forever(policy):
    # admission off, so interactive work starts whenever blocks are free and then outgrows the pool
    d, low, interactive, worst = starving_batch_request(
        policy, 96, interactive_prompt=500, batch_output=200, **{"admission.enabled": False, "engine.max_num_seqs": 3}
    )
    assert low.num_preemptions > 0 or policy == "vllm_like"  # vllm_like preempts the newest instead
    assert low.finish_reason is FinishReason.LENGTH and arrived_after(low, interactive)
    assert worst <= d.core.config.preemption.max_consecutive_preemptions


@pytest.mark.parametrize("order", list(VictimOrder))
def test_the_cap_on_consecutive_preemptions_applies_to_every_victim_order(order):
    old, new = (
        Request(
            f"r{i}",
            "batchco",
            TrafficClass.BATCH,
            num_prompt_tokens=100,
            max_new_tokens=8,
            arrival_s=0.0,
            seq_no=i,
            block_ids=[i],
        )
        for i in (1, 2)
    )
    new.consecutive_preemptions = old.consecutive_preemptions = 1
    first = pick_victim([old, new], order, 2, 1.0, 10.0, 100, lambda r: 0.0)
    first.consecutive_preemptions = 2  # preempted twice in a row without progress: protected now
    assert pick_victim([old, new], order, 2, 1.0, 10.0, 100, lambda r: 0.0) is not first
