"""Chaos for the KV tiers, judged by three checks after the engine drained:

- **bounded wait**: no request waited on a tier load longer than `max_load_wait_ms` (a slower
  load is not started: the tokens are recomputed);
- **no leaks**: no live GPU block, no load in flight, every block that entered a tier left it by
  eviction or drop or is still there, within capacity and tenant caps;
- **no wrong block**: no load whose checksum failed (or whose tier went away) was served.

The cases: the host tier full, the disk detached mid-run and reattached, bandwidth cut 10x, and
injected load failures. Each passes as shipped; with `fallback_to_recompute` off (a broken
target) the cases that need the fallback fail a check. The host tier full (and its write-back
saturated) needs no fallback: it evicts to make room and drops what the write-back cannot take,
counted, and no check fails either way."""

from __future__ import annotations

from reference_engine.executors.base import Tier
from tests.helpers import distinct_prompts, serve_rounds, tiered_driver

WAIT_BOUND_MS = 100.0


def violations(d) -> dict[str, float]:
    """What each check found: seconds over the wait bound, blocks leaked, wrong blocks served."""
    core, tiers = d.core, d.core.tiers
    waited = [
        e.latency_s
        for e in core.events.since(0).events
        if e.kind.value == "tier_load" and e.reason in ("ok", "failed", "served_corrupt")
    ]
    over = max([0.0, *(w - tiers.config.max_load_wait_ms / 1000 for w in waited)])
    leaked = core.pool.num_live + len(core.scheduler.loads)
    for store in tiers.stores.values():
        store.check_invariants()
        leaked += store.num_leaked
    core.pool.check_invariants()
    wrong = sum(c.corrupt_served for c in tiers.counters.values())
    return {k: v for k, v in {"wait_s_over_bound": over, "leaked": leaked, "wrong_served": wrong}.items() if v > 0}


def _run(fallback: bool, **tiers):
    d = tiered_driver(fallback_to_recompute=fallback, max_load_wait_ms=WAIT_BOUND_MS, **tiers)
    reqs = serve_rounds(d, distinct_prompts(12))
    assert all(r.num_output_tokens == 4 for r in reqs)  # every request answered in full
    return d


def test_host_tier_full():
    d = _run(True, host_gib=0.1, host_write_gbps=0.5, max_write_backlog_ms=5)
    tiers = d.core.tiers
    assert tiers.used_blocks(Tier.HOST) == tiers.capacity_blocks(Tier.HOST)  # full: it evicts to make room
    assert tiers.stores[Tier.HOST].num_evicted > 0 and tiers.counters[Tier.HOST].write_dropped > 0
    assert violations(d) == {}


def test_bandwidth_cut_tenfold():
    cut = {"host_gib": 0.1, "disk_gib": 4.0, "host_read_gbps": 6.4, "disk_read_gbps": 0.6}
    healthy = _run(True, **cut)
    assert sum(c.slower for c in healthy.core.tiers.counters.values()) > 0  # recomputed instead
    assert violations(healthy) == {}
    assert "wait_s_over_bound" in violations(_run(False, **cut))


def test_injected_load_failures():
    healthy = _run(True, host_gib=4.0, load_failure_rate=0.5)
    assert healthy.core.tiers.counters[Tier.HOST].failed > 0 and violations(healthy) == {}
    assert "wrong_served" in violations(_run(False, host_gib=4.0, load_failure_rate=0.5))


def _detach_during_a_disk_load(fallback: bool):
    d = tiered_driver(
        fallback_to_recompute=fallback, max_load_wait_ms=WAIT_BOUND_MS, host_gib=0.1, disk_gib=4.0, disk_read_gbps=25.0
    )
    prompts = distinct_prompts(12)
    serve_rounds(d, prompts, rounds=1)
    core, tiers = d.core, d.core.tiers
    r = core.add_request(tenant="acme", prompt_token_ids=[*prompts[0], 7], max_new_tokens=4)
    d.step()
    load = core.scheduler.loads[r.request_id]
    assert Tier.DISK in load.sources
    tiers.detach(Tier.DISK)  # unplugged while the load runs
    assert tiers.used_blocks(Tier.DISK) == 0
    d.run()
    assert r.num_output_tokens == 4
    tiers.reattach(Tier.DISK)  # back, empty: demotions go there again
    serve_rounds(d, prompts, rounds=1)
    assert tiers.used_blocks(Tier.DISK) > 0
    return d


def test_disk_detached_and_reattached_mid_run():
    healthy = _detach_during_a_disk_load(True)
    assert healthy.core.tiers.counters[Tier.DISK].failed > 0 and violations(healthy) == {}
    assert "wrong_served" in violations(_detach_during_a_disk_load(False))


def _stats_after(tiers: dict, chaos) -> dict:
    """The tiers' figures after the rounds, with `chaos(tiered_cache)` applied before them."""
    d = tiered_driver(max_load_wait_ms=WAIT_BOUND_MS, **tiers)
    chaos(d.core.tiers)
    serve_rounds(d, distinct_prompts(12))
    return d.core.tiers.stats()


def test_chaos_while_running_is_the_configured_chaos():
    """What the admin API turns on at run time (a read slowdown, a failure rate) is exactly what
    the config sets at start: the same loads, recomputes and failures."""

    def slow(tiers):
        tiers.slow_reads(Tier.HOST, 10)
        tiers.slow_reads(Tier.DISK, 10)

    cut = {"host_gib": 0.1, "disk_gib": 4.0, "host_read_gbps": 6.4, "disk_read_gbps": 0.6}
    full = {"host_gib": 0.1, "disk_gib": 4.0, "host_read_gbps": 64.0, "disk_read_gbps": 6.0}
    assert _stats_after(full, slow) == _stats_after(cut, lambda tiers: None)
    failing = _stats_after({"host_gib": 4.0}, lambda tiers: tiers.inject_load_failures(0.5))
    assert failing == _stats_after({"host_gib": 4.0, "load_failure_rate": 0.5}, lambda tiers: None)
    assert failing["host"]["failed"] > 0
