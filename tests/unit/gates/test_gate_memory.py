"""memory_recovery and memory_level_off: the two memory-shape gates."""

import pytest

from gates import Outcome
from tests.fixtures.records import RecordBuilder


def test_recovery_passes_when_in_flight_kv_falls_back(judge, healthy):
    result = judge(healthy, "memory_recovery")
    assert result.outcome is Outcome.PASS and result.headline.value == 0


def test_recovery_fails_when_blocks_stay_held_after_load(judge, healthy):
    healthy.sample(99.5, 640, retained_blocks=40)  # 600 in-flight blocks after every request ended
    result = judge(healthy, "memory_recovery")
    assert result.outcome is Outcome.FAIL and result.evidence["last_after_load"]["t_s"] == 99.5


def test_recovery_ignores_retained_idle_sessions(judge, healthy):
    assert judge(healthy.sample(99.5, 500, retained_blocks=500), "memory_recovery").outcome is Outcome.PASS


def test_recovery_not_measurable_without_samples_or_phases(judge, healthy):
    assert judge(healthy.signals(engine_samples=False), "memory_recovery").outcome is Outcome.NOT_MEASURABLE
    no_phases = RecordBuilder().healthy().meta(phases=[])
    assert judge(no_phases, "memory_recovery").outcome is Outcome.NOT_MEASURABLE


def test_level_off_passes_below_the_reject_rung(judge, healthy):
    result = judge(healthy, "memory_level_off")
    assert result.outcome is Outcome.PASS
    # the samples peak at 80 %; the engine entered pause_batch at 88 % between two of them
    assert result.headline.value == 0.88 and result.headline.limit == pytest.approx(0.95)  # up to the reject rung


def test_level_off_fails_when_usage_climbs_to_the_full_pool(judge, healthy):
    for t in range(50, 70):
        healthy.sample(t + 0.5, 800 + 10 * (t - 49))
    result = judge(healthy, "memory_level_off")
    assert result.outcome is Outcome.FAIL and result.evidence["peak"]["usage"] == 1.0
    assert result.evidence["late_growth"] > 0


def test_level_off_sees_a_peak_between_samples_in_the_engines_level_changes(judge, healthy):
    healthy.event("watermark", 55.2, reason="reject", usage=0.97)  # the pool filled between two samples
    result = judge(healthy, "memory_level_off")
    assert result.outcome is Outcome.FAIL
    assert result.evidence["peak"] == {"t_s": 55.2, "usage": 0.97, "seen_by": "event"}


def test_level_off_reads_level_changes_only_from_an_engine_that_reports_events(judge, healthy):
    healthy.event("watermark", 55.2, reason="reject", usage=0.97).signals(engine_events=False)
    assert judge(healthy, "memory_level_off").outcome is Outcome.PASS


def test_level_off_not_measurable_without_an_evict_watermark(judge, healthy):
    assert judge(healthy.meta(watermarks={}), "memory_level_off").outcome is Outcome.NOT_MEASURABLE


def test_recovery_reads_the_drained_sample_at_the_very_end_of_cooldown(judge, healthy):
    # Replay ends the cooldown (here 70-100 s) at the first sample at or after the drain: that
    # sample, exactly at the phase's end, shows memory fell back; a window open at the end missed it.
    healthy.sample(99.5, 640, retained_blocks=40).sample(100.0, 40, retained_blocks=40)
    result = judge(healthy, "memory_recovery")
    assert result.outcome is Outcome.PASS and result.evidence["last_after_load"]["t_s"] == 100.0
