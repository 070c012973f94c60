"""P/D: two pools and a link (reference_engine/core/pd.py). Counts and states, never wall time."""

from __future__ import annotations

import math
from typing import Any

from reference_engine import EventKind, with_overrides
from reference_engine.core.pd import DECODE, PREFILL, PDCore, PdState
from tests.helpers import small_config

PROMPT = 160  # ten full blocks


def pd_core(**pd: Any) -> PDCore:
    config = with_overrides(small_config(1024), {"pd.enabled": True, **{f"pd.{k}": v for k, v in pd.items()}})
    return PDCore(config, hash_key=b"k" * 32)


def ids(n: int, seed: int = 1) -> list[int]:
    return [10_000 + seed * 100_003 + i for i in range(n)]


def add(pd: PDCore, seed: int = 1, max_new: int = 16):
    return pd.add_request(tenant="acme", prompt_token_ids=ids(PROMPT, seed), max_new_tokens=max_new)


def kinds(pd: PDCore, kind: EventKind) -> list:
    return [e for e in pd.events if e.kind is kind]


def drained(pd: PDCore) -> None:
    for role in (PREFILL, DECODE):
        pool = pd.sides[role].core.pool
        pool.check_invariants()
        assert pool.num_live == sum(1 for b in range(pool.num_blocks) if pool.ref_count(b) and pool.hold_count(b)), role


def test_a_request_prefills_transfers_and_decodes() -> None:
    pd = pd_core()
    r = add(pd)
    pd.run_until(math.inf)
    assert r.state is PdState.FINISHED and r.finish_reason == "length"
    assert r.prefill.num_output_tokens == 1 and r.decode is not None and r.decode.num_output_tokens == 16
    [started] = kinds(pd, EventKind.TRANSFER_STARTED)
    [landed] = kinds(pd, EventKind.TRANSFER_FINISHED)
    assert started.num_blocks == landed.num_blocks == PROMPT // 16
    assert started.num_bytes == landed.num_bytes == 10 * pd.decode.memory.bytes_per_block
    [scheduled] = [e for e in pd.decode.events if e.kind is EventKind.SCHEDULED]
    assert scheduled.num_tokens == 144  # found in the pulled blocks: all but the last, one token is always computed
    assert r.decode.num_prefix_hit_tokens == r.prefill.num_prefix_hit_tokens == 0  # the answer's cached tokens
    assert (pd.decode.pool.num_prefix_hits, pd.decode.pool.num_external_hits) == (0, 9)  # the transfer's, apart
    assert r.decode.first_scheduled_s >= r.prefill.finish_s + landed.latency_s - pd.pd.tick_ms / 1e3
    assert pd.stranded_blocks() == 0 and pd.link.bytes_moved == landed.num_bytes
    [first] = kinds(pd, EventKind.FIRST_TOKEN)  # the client's view: the decode side's first token
    [done] = kinds(pd, EventKind.FINISHED)
    assert first.t_s == r.first_token_s == r.decode.first_token_s and (done.reason, done.num_tokens) == ("length", 16)
    drained(pd)


def test_the_decode_side_pulls_only_what_its_own_prefix_cache_lacks() -> None:
    pd = pd_core()
    add(pd, seed=1)
    pd.run_until(math.inf)
    second = add(pd, seed=1)  # same prompt: a hit on both sides
    pd.run_until(math.inf)
    started = kinds(pd, EventKind.TRANSFER_STARTED)
    assert [e.num_blocks for e in started] == [10, 0]
    assert started[1].num_tokens == PROMPT
    assert second.prefill.num_prefix_hit_tokens == 144 and second.finish_reason == "length"


def test_the_decode_side_reserves_before_the_pull_and_releases_once_scheduled() -> None:
    pd = pd_core(link_gbps=0.001)  # a slow link: the transfer spans many ticks
    r = add(pd)
    while r.state is not PdState.TRANSFERRING:
        pd.run_until(pd.now() + 0.005)
    assert len(r.reservation) == 10 and pd.decode.pool.num_live == 10
    assert r.source_blocks and pd.prefill.pool.num_live == len(r.source_blocks)
    pd.run_until(math.inf)
    assert r.finish_reason == "length" and not r.reservation and not r.source_blocks
    [released] = kinds(pd, EventKind.RESERVATION_RELEASED)
    assert released.num_blocks == 10 and pd.prefill.pool.num_live == pd.decode.pool.num_live == 0


def test_the_orphan_check_counts_the_pairs_references_as_owned() -> None:
    pd = pd_core(link_gbps=0.001)  # mid-transfer: a source on one side, a reservation on the other
    r = add(pd)
    while r.state is not PdState.TRANSFERRING:
        pd.run_until(pd.now() + 0.005)
    assert pd.prefill.reconcile() == pd.decode.reconcile() == 0
    assert len(r.reservation) == 10 and r.source_blocks
    pd.run_until(math.inf)
    assert r.finish_reason == "length"
    drained(pd)


def test_a_cancel_mid_transfer_frees_both_sides() -> None:
    pd = pd_core(link_gbps=0.001)
    r = add(pd)
    while r.state is not PdState.TRANSFERRING:
        pd.run_until(pd.now() + 0.005)
    assert pd.abort(r.request_id)
    assert r.state is PdState.FINISHED and r.finish_reason == "cancelled"
    assert pd.prefill.pool.num_live == pd.decode.pool.num_live == pd.stranded_blocks() == 0
    [failed] = kinds(pd, EventKind.TRANSFER_FAILED)
    assert failed.reason == "cancelled"
    pd.run_until(math.inf)
    assert not pd.has_work()


def test_a_broken_engine_strands_the_reservation_of_an_aborted_pull() -> None:
    pd = pd_core(link_gbps=0.001, release_reservation_on_abort=False)
    r = add(pd)
    while r.state is not PdState.TRANSFERRING:
        pd.run_until(pd.now() + 0.005)
    pd.abort(r.request_id)
    pd.run_until(math.inf)
    assert pd.stranded_blocks() == 10 and pd.decode.pool.num_live == 10 and pd.prefill.pool.num_live == 0


def test_a_cancel_while_prefilling_or_decoding_leaves_nothing() -> None:
    pd = pd_core()
    early, late = add(pd, seed=1, max_new=400), add(pd, seed=2, max_new=400)
    pd.abort(early.request_id)
    while late.state is not PdState.DECODING or late.decode is None or late.decode.num_output_tokens < 5:
        pd.run_until(pd.now() + 0.005)
    pd.abort(late.request_id)
    pd.run_until(math.inf)
    assert early.finish_reason == late.finish_reason == "cancelled"
    assert pd.prefill.pool.num_live == pd.decode.pool.num_live == pd.stranded_blocks() == 0


def test_a_failed_transfer_falls_back_to_local_prefill() -> None:
    pd = pd_core(failure_rate=1.0)
    r = add(pd)
    pd.run_until(math.inf)
    [failed] = kinds(pd, EventKind.TRANSFER_FAILED)
    assert (failed.reason, failed.mode) == ("failed", "local_prefill")
    assert r.fell_back and r.finish_reason == "length" and r.decode is not None
    assert r.decode.num_prefix_hit_tokens == 0  # the pull never landed: the decode side computed it
    assert pd.prefill.pool.num_live == pd.decode.pool.num_live == 0


def test_a_failed_transfer_can_end_the_request_with_an_error() -> None:
    pd = pd_core(failure_rate=1.0, on_failure="error")
    r = add(pd)
    pd.run_until(math.inf)
    assert r.finish_reason == "error" and r.decode is None
    assert pd.prefill.pool.num_live == pd.decode.pool.num_live == 0


def test_a_transfer_that_takes_too_long_times_out() -> None:
    pd = pd_core(link_gbps=0.0001, transfer_timeout_ms=100)
    r = add(pd)
    pd.run_until(math.inf)
    [failed] = kinds(pd, EventKind.TRANSFER_FAILED)
    assert failed.reason == "timeout" and failed.latency_s >= 0.1 and r.fell_back
    assert r.finish_reason == "length" and pd.num_timed_out == 1


def test_a_pull_waits_for_room_on_a_decode_pool_under_pressure() -> None:
    pd = pd_core(transfer_timeout_ms=200)
    # the request's estimate (ten prompt blocks and its answer's) would pass its class limit, the
    # preempt rung: the decode side's admission would queue it, so the pull waits
    squatter = pd.decode.pool.allocate(pd.decode.marks.preempt - 5, None, 0.0)
    r = add(pd)
    pd.run_until(1.0)  # past the transfer timeout, within the decode side's queue deadline
    [failed] = kinds(pd, EventKind.TRANSFER_FAILED)
    assert failed.reason == "timeout" and not kinds(pd, EventKind.TRANSFER_STARTED)
    assert r.fell_back and r.state is PdState.DECODING and r.decode is not None and r.decode.first_scheduled_s is None
    assert pd.prefill.pool.num_live == 0 and pd.decode.pool.num_live == len(squatter)  # queued, holding nothing
    pd.decode.pool.decref(squatter, pd.now())  # room again: the decode side's queue lets it in
    pd.run_until(math.inf)
    assert r.state is PdState.FINISHED and r.finish_reason == "length" and pd.decode.pool.num_live == 0


def test_a_broken_engine_leaves_a_failed_transfer_unresolved() -> None:
    pd = pd_core(failure_rate=1.0, resolve_failed_transfers=False)
    r = add(pd)
    pd.run_until(math.inf)  # returns: nothing can change any more
    assert r.hung and r.state is PdState.TRANSFERRING and pd.hung() == [r]
    assert pd.decode.pool.num_live == 10 and pd.prefill.pool.num_live == 10
    [failed] = kinds(pd, EventKind.TRANSFER_FAILED)
    assert failed.mode == "unresolved"


def test_each_side_has_its_own_pool() -> None:
    pd = pd_core(decode={"hardware.kv_pool_gib": small_config(2048).hardware.kv_pool_gib})
    snap = pd.snapshot()
    assert (snap[PREFILL].num_blocks, snap[DECODE].num_blocks) == (1024, 2048)
    assert pd.prefill.marks.num_blocks == 1024 and pd.decode.marks.num_blocks == 2048


def test_a_prefill_engine_lost_mid_transfer_lets_both_sides_go() -> None:
    pd = pd_core(link_gbps=0.001)  # a transfer takes seconds: it is in flight when the prefill side dies
    in_flight, prefilling = add(pd, seed=1), None
    while in_flight.state is not PdState.TRANSFERRING:
        pd.run_until(pd.now() + 0.005)
    prefilling = add(pd, seed=2)
    pd.run_until(pd.now() + 0.001)
    assert prefilling.state is PdState.PREFILLING and pd.lose_prefill() == 2
    pd.run_until(math.inf)
    assert prefilling.finish_reason == "worker_lost" and prefilling.decode is None
    [failed] = [e for e in kinds(pd, EventKind.TRANSFER_FAILED) if e.request_id == in_flight.request_id]
    assert failed.reason == "source_lost" and in_flight.fell_back and in_flight.finish_reason == "length"
    assert pd.stranded_blocks() == 0
    drained(pd)
