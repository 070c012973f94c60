"""gates/fleet.py: the gates that read a target's telemetry judge every replica and the fleet."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from gates import GateResult, Outcome, get_gate, load_thresholds
from gates.fleet import PER_REPLICA, evaluate_gate
from tests.fixtures.records import RecordBuilder

Judge = Callable[[RecordBuilder, str], GateResult]


@pytest.fixture
def judged(tmp_path: Path) -> Judge:
    runs = itertools.count()

    def _judged(builder: RecordBuilder, gate: str) -> GateResult:
        record = builder.build(tmp_path / f"run-{next(runs)}")
        return evaluate_gate(get_gate(gate), record, load_thresholds().for_gate(gate))

    return _judged


def test_a_healthy_fleet_passes_on_the_fleet_and_every_replica(judged: Judge) -> None:
    for gate in ("no_oom", "memory_recovery", "capacity_after_drain", "eviction_thrash"):
        result = judged(RecordBuilder().fleet(), gate)
        assert result.outcome is Outcome.PASS, f"{gate}: {result.explanation}"
        assert "passed on a, b" in result.explanation and result.evidence["fleet_outcome"] == "pass"
        parts = result.evidence["replicas"]
        assert {name: part["outcome"] for name, part in parts.items()} == {"a": "pass", "b": "pass"}
        first = result.measurements[0].metric
        assert {f"{first}[a]", f"{first}[b]"} <= {m.metric for m in result.measurements}


def test_a_restart_on_one_replica_fails_no_oom_naming_it(judged: Judge) -> None:
    builder = RecordBuilder().fleet().event("engine_restart", 40.0, reason="health", latency_s=3.0, replica="b")
    result = judged(builder, "no_oom")
    assert result.outcome is Outcome.FAIL and result.explanation.startswith("failed on b: ")
    assert (
        result.evidence["replicas"]["a"]["outcome"] == "pass" and result.evidence["replicas"]["b"]["outcome"] == "fail"
    )
    assert result.headline is not None and result.headline.value == 1  # the fleet's count, naming the same restart


def test_a_replica_that_keeps_its_kv_fails_memory_recovery_though_the_fleet_passes(judged: Judge) -> None:
    builder = RecordBuilder().fleet()
    for t in range(70, 100):
        builder.replica_sample("a", float(t), 0.4)  # a holds 40 % of its pool after the load
    result = judged(builder, "memory_recovery")
    assert result.outcome is Outcome.FAIL and "failed on a" in result.explanation
    assert result.evidence["fleet_outcome"] == "pass"  # the fleet's own samples say nothing of it
    assert result.headline is not None and result.headline.metric == "max_cooldown_fraction_of_peak[a]"


def test_a_replica_whose_pool_did_not_come_back_fails_capacity_after_drain(judged: Judge) -> None:
    builder = RecordBuilder().fleet()
    row = next(r for r in builder.rows["replicas"] if r["replica"] == "b")
    builder.replica("b", **{**{k: v for k, v in row.items() if k not in ("replica", "url")}, "final_free_blocks": 400})
    result = judged(builder, "capacity_after_drain")
    assert result.outcome is Outcome.FAIL and "failed on b" in result.explanation


def test_metrics_missing_under_load_leave_that_replica_and_the_fleet_not_measurable(judged: Judge) -> None:
    builder = RecordBuilder().fleet()
    for t in range(30, 35):
        builder.replica_sample("b", float(t), missing=True)
    result = judged(builder, "memory_recovery")
    assert result.outcome is Outcome.NOT_MEASURABLE
    parts = result.evidence["replicas"]
    assert parts["a"]["outcome"] == "pass" and parts["b"]["outcome"] == "not_measurable"
    assert "t=30.0–35.0 s" in parts["b"]["explanation"] and "passed on a" in result.explanation
    assert result.evidence["fleet_outcome"] == "not_measurable"
    assert judged(builder, "no_oom").outcome is Outcome.PASS  # /health watched b all along: not windowed
    assert judged(builder, "capacity_after_drain").outcome is Outcome.PASS  # before and after were read


def test_a_failure_outside_the_gap_still_fails(judged: Judge) -> None:
    builder = RecordBuilder().fleet()
    for t in range(30, 35):
        builder.replica_sample("b", float(t), missing=True)
    for t in range(70, 100):
        builder.replica_sample("b", float(t), 0.4)
    result = judged(builder, "memory_recovery")
    assert result.outcome is Outcome.FAIL and "failed on b" in result.explanation
    assert "its metrics were missing at t=30.0–35.0 s" in result.evidence["replicas"]["b"]["explanation"]


def test_a_replica_without_the_signal_is_listed_not_judged(judged: Judge) -> None:
    builder = RecordBuilder().fleet()
    row = next(r for r in builder.rows["replicas"] if r["replica"] == "b")
    without = {k: v for k, v in row.items() if not k.startswith("kv_") and k not in ("replica", "url")}
    builder.replica("b", **without).replica_collectors("b", kv_events=False)
    result = judged(builder, "eviction_thrash")
    assert result.outcome is Outcome.PASS
    assert "not measurable on b: no engine events and no KV cache events" in result.explanation


def test_gates_of_the_client_and_single_targets_are_judged_as_before(judged: Judge, tmp_path: Path) -> None:
    assert "goodput" not in PER_REPLICA and "cancel_release" not in PER_REPLICA
    assert "replicas" not in judged(RecordBuilder().fleet(), "goodput").evidence
    record = RecordBuilder().healthy().build(tmp_path / "single")
    gate = get_gate("no_oom")
    limits = load_thresholds().for_gate("no_oom")
    assert evaluate_gate(gate, record, limits) == gate.evaluate(record, limits)
