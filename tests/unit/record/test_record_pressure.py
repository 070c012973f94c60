"""The pressure summary: rungs reached (when, how often, how long) and the decisions counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from record.pressure import decisions_never_run, measure_pressure, missing_rungs, record_pressure
from record.run_record import RunRecord
from tests.fixtures.records import RecordBuilder


def ladder_run() -> RecordBuilder:
    """Usage climbs to preempt at 20 s, falls back to evict at 22 s, to normal at 40 s; back at
    preempt from 90 s to the end of the 100 s run."""
    b = RecordBuilder()
    for t, level, usage in (
        (10, "warn", 0.75),
        (12, "evict", 0.86),
        (20, "preempt", 0.93),
        (22, "evict", 0.86),
        (40, "normal", 0.5),
        (90, "preempt", 0.921),
    ):
        b.event("watermark", float(t), reason=level, usage=usage)
    b.event("preempted", 21.0, mode="swap", request_id="r1").event("preempted", 21.0, mode="recompute", request_id="r2")
    b.event("evicted", 13.0, num_blocks=8, reason="watermark").event("expired", 50.0, request_id="s1")
    b.event("rejected", 21.0, reason="kv_capacity", request_id="r3")
    return b.final(num_evicted_cached_blocks=120)


def test_rungs_say_when_how_often_and_how_long(tmp_path: Path) -> None:
    p = measure_pressure(ladder_run().build(tmp_path))
    assert p.source == "engine" and p.peak_usage == pytest.approx(0.93)
    warn, evict, preempt, reject = (p.rung(n) for n in ("warn", "evict", "preempt", "reject"))
    assert (warn.first_s, warn.entries, warn.held_s) == (10.0, 2, pytest.approx(30 + 10))
    assert (evict.first_s, evict.entries, evict.held_s) == (12.0, 2, pytest.approx(28 + 10))
    assert (preempt.first_s, preempt.entries, preempt.held_s) == (20.0, 2, pytest.approx(2 + 10))
    assert reject.first_s is None and reject.entries == 0 and not p.reached("reject")
    assert p.rung("admission").first_s == 12.0  # a jump over a rung reaches it too
    assert missing_rungs(p) == ()


def test_decisions_are_counted_from_events_and_final_state(tmp_path: Path) -> None:
    p = measure_pressure(ladder_run().build(tmp_path))
    d = p.decisions
    assert (d["preempted_swap"], d["preempted_recompute"], d["preempted_kill"]) == (1, 1, 0)
    assert (d["evicted_sessions"], d["evicted_session_blocks"], d["expired_sessions"]) == (1, 8, 1)
    assert d["rejected_kv_capacity"] == 1 and d["reclaimed_cached_blocks"] == 120
    assert decisions_never_run([p]) == ()
    assert decisions_never_run([p.model_copy(update={"decisions": {}}), None]) == (
        "eviction",
        "preemption",
        "swap",
        "recompute",
        "session_expiry",
    )


def test_a_run_that_stayed_low_is_missing_the_rungs_that_matter(tmp_path: Path) -> None:
    p = measure_pressure(RecordBuilder().event("watermark", 5.0, reason="warn", usage=0.76).build(tmp_path))
    assert p.reached("warn") and missing_rungs(p) == ("evict", "preempt")
    assert missing_rungs(None) == ("evict", "preempt")


def test_without_events_the_samples_give_the_level(tmp_path: Path) -> None:
    b = RecordBuilder().signals(engine_events=False)
    for t, live in ((0, 100), (1, 900), (2, 930), (3, 100)):
        b.sample(float(t), live)
    p = measure_pressure(b.build(tmp_path))
    assert p.source == "samples" and p.reached("preempt") and not p.reached("reject")
    assert p.rung("preempt").held_s == pytest.approx(1.0)


def test_nothing_known_says_none(tmp_path: Path) -> None:
    p = measure_pressure(RecordBuilder().signals(engine_events=False).meta(watermarks={}).build(tmp_path))
    assert p.source == "none" and p.rungs == [] and missing_rungs(p) == ("evict", "preempt")


def test_the_summary_is_stored_in_meta(tmp_path: Path) -> None:
    run_dir = ladder_run().write(tmp_path / "run")
    stored = record_pressure(run_dir)
    assert RunRecord.load(run_dir).meta.pressure == stored


def vllm_like(**final: float) -> RecordBuilder:
    """A server without a ladder: no engine events, no watermarks, its usage gauge and counters."""
    b = RecordBuilder().signals(engine_events=False).meta(watermarks={}).initial(num_preemptions=4.0)
    for t, live in ((0, 100), (1, 980), (2, 100)):
        b.sample(float(t), live)
    b.request(sent_s=20.0).request(sent_s=21.0, status="error", http_status=503, error_code="overloaded")
    return b.final(**final)


def test_a_target_without_a_ladder_shows_pressure_by_what_it_did(tmp_path: Path) -> None:
    p = measure_pressure(vllm_like(kv_blocks_removed=103, num_preemptions=6.0).build(tmp_path))
    assert p.source == "target" and p.rungs == [] and p.peak_usage == pytest.approx(0.98)
    assert p.decisions == {"reclaimed_cached_blocks": 103, "preempted_mode_unknown": 2, "rejected_overload": 1}
    assert missing_rungs(p) == ()  # it evicted cached blocks and preempted: both decisions ran


def test_a_target_that_never_evicted_or_whose_counters_are_missing_is_missing_the_rungs(tmp_path: Path) -> None:
    quiet = measure_pressure(vllm_like(kv_blocks_removed=0, num_preemptions=4.0).build(tmp_path / "quiet"))
    assert missing_rungs(quiet) == ("evict", "preempt")
    blind = measure_pressure(vllm_like().build(tmp_path / "blind"))  # no KV events, no preemption counter
    assert blind.source == "target" and set(blind.decisions) == {"rejected_overload"}
    assert missing_rungs(blind) == ("evict", "preempt")


def test_each_engine_of_a_pair_has_its_own_ladder(tmp_path: Path) -> None:
    """Two engines' watermark events interleaved are no one ladder: the prefill pool reaches
    preempt, the decode pool only evict; the run counts a rung as reached once both did."""
    b = RecordBuilder().replica("prefill", worker="prefill").replica("decode", worker="decode")
    for t, level, worker in ((10, "evict", "prefill"), (11, "normal", "decode"), (12, "evict", "decode")):
        b.event("watermark", float(t), reason=level, usage=0.86, worker=worker)
    b.event("watermark", 20.0, reason="preempt", usage=0.93, worker="prefill")
    p = measure_pressure(b.build(tmp_path))
    assert sorted(p.replicas) == ["decode", "prefill"]
    prefill = {r.rung: r.first_s for r in p.replicas["prefill"]}
    decode = {r.rung: r.first_s for r in p.replicas["decode"]}
    assert (prefill["evict"], prefill["preempt"]) == (10.0, 20.0)
    assert (decode["evict"], decode["preempt"]) == (12.0, None)
    assert p.rung("evict").first_s == 12.0 and not p.reached("preempt")
    assert missing_rungs(p) == ("preempt",)


def test_a_replica_without_watermark_events_reached_no_rung(tmp_path: Path) -> None:
    b = RecordBuilder().replica("prefill", worker="prefill").replica("decode", worker="decode")
    b.event("watermark", 10.0, reason="preempt", usage=0.93, worker="decode")
    p = measure_pressure(b.build(tmp_path))
    assert not any(r.first_s for r in p.replicas["prefill"]) and p.replicas["decode"][0].first_s == 10.0
    assert missing_rungs(p) == ("evict", "preempt")
