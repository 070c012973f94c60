"""The routing gates on hand-made fleet records: replica_kill, unhealthy_routing, prefix_routing,
and the matrix rule that holds a fleet's hit ratio against the round-robin baseline's."""

from __future__ import annotations

import pytest

from gates import Outcome, evaluate
from gates.comparison import hit_ratio_shortfalls
from tests.fixtures.records import RecordBuilder


def fleet(policy: str = "prefix_aware", run_id: str = "run-test") -> RecordBuilder:
    """The healthy run (a fleet of two: fixtures/records.py), routed by `policy`."""
    builder = RecordBuilder(run_id=run_id).healthy().routed_fleet()
    for row in builder.rows["events"]:
        if row["kind"] == "routed":
            row["mode"] = policy
    return builder


def judge(builder: RecordBuilder, tmp_path, gate: str):
    return evaluate(builder.build(tmp_path / "run"), only=[gate]).result(gate)


def kill(builder: RecordBuilder, worker: int, t_s: float, back_s: float | None) -> RecordBuilder:
    builder.event("worker_died", t_s, worker=worker, reason="killed by SIGKILL")
    return builder if back_s is None else builder.event("worker_ready", back_s, worker=worker)


@pytest.mark.parametrize("gate", ["replica_kill", "unhealthy_routing", "prefix_routing"])
def test_a_record_without_a_router_is_not_measurable(tmp_path, gate):
    assert judge(RecordBuilder().healthy(), tmp_path, gate).outcome is Outcome.NOT_MEASURABLE


def test_replica_kill_counts_only_losses_off_the_dead_replica(tmp_path):
    b = kill(fleet(), 0, 73.0, 74.0)
    b.request("on-0", sent_s=72.5, ttft_s=0.1, e2e_s=1.2, status="error", http_status=503, error_code="worker_lost")
    b.event("routed", 72.5, request_id="on-0", worker=0, mode="prefix_aware", num_blocks=0, reason="policy")
    result = judge(b, tmp_path, "replica_kill")
    assert result.outcome is Outcome.PASS and result.evidence["num_lost"] == 1
    b.request("on-1", sent_s=72.6, ttft_s=0.1, e2e_s=0.6, status="error", http_status=503, error_code="worker_lost")
    b.event("routed", 72.6, request_id="on-1", worker=1, mode="prefix_aware", num_blocks=0, reason="policy")
    result = judge(b, tmp_path, "replica_kill")
    assert result.outcome is Outcome.FAIL and result.evidence["lost_elsewhere"] == ["on-1"]


def test_replica_kill_without_a_death_is_not_measurable(tmp_path):
    builder = fleet().drop("events", kind="worker_died")
    assert judge(builder, tmp_path, "replica_kill").outcome is Outcome.NOT_MEASURABLE


def test_unhealthy_routing_counts_decisions_between_a_death_and_the_return(tmp_path):
    b = fleet()
    assert judge(b, tmp_path, "unhealthy_routing").outcome is Outcome.PASS  # worker 1 out 71-72 s
    b.event("routed", 71.5, request_id="late", worker=1, mode="prefix_aware", num_blocks=0, reason="policy")
    b.event("routed", 72.5, request_id="back", worker=1, mode="prefix_aware", num_blocks=0, reason="policy")
    result = judge(b, tmp_path, "unhealthy_routing")
    assert result.outcome is Outcome.FAIL and result.evidence["routed_to_unhealthy"] == ["late"]


def test_unhealthy_routing_holds_a_replica_that_never_came_back_out_for_good(tmp_path):
    b = kill(fleet(), 0, 80.0, None)
    b.event("routed", 90.0, request_id="late", worker=0, mode="prefix_aware", num_blocks=0, reason="policy")
    assert judge(b, tmp_path, "unhealthy_routing").outcome is Outcome.FAIL


def test_prefix_routing_fails_a_router_that_expected_none_of_the_cached_blocks(tmp_path):
    result = judge(fleet(), tmp_path, "prefix_routing")  # each request hits 2 blocks, the router expected 2
    assert result.outcome is Outcome.PASS and result.evidence["index_recall"] == 1.0
    blind = fleet()
    for row in blind.rows["events"]:
        if row["kind"] == "routed":
            row["num_blocks"] = 0  # KV events off: an empty index
    result = judge(blind, tmp_path, "prefix_routing")
    assert result.outcome is Outcome.FAIL and result.evidence["index_recall"] == 0.0


def test_prefix_routing_judges_no_recall_for_policies_that_do_not_look(tmp_path):
    result = judge(fleet("round_robin"), tmp_path, "prefix_routing")
    assert result.outcome is Outcome.PASS and "index_recall" not in result.evidence
    assert result.evidence["routing"] == "round_robin" and result.evidence["fleet_hit_ratio"] > 0


def test_a_fleet_below_the_round_robin_baseline_beyond_noise_is_a_shortfall(tmp_path):
    def verdict(builder: RecordBuilder, name: str):
        return evaluate(builder.build(tmp_path / name), only=["prefix_routing"])

    baseline = verdict(fleet("round_robin", "rr"), "rr")
    assert hit_ratio_shortfalls([verdict(fleet(run_id="same"), "same")], [baseline]) == []
    worse = fleet(run_id="worse")
    for row in worse.rows["events"]:
        if row["kind"] == "scheduled":
            row["num_tokens"] = 0  # nothing found in any cache
    [shortfall] = hit_ratio_shortfalls([verdict(worse, "worse")], [baseline])
    assert shortfall.candidate.run_id == "worse" and "below the round-robin baseline" in shortfall.explanation()
    assert hit_ratio_shortfalls([verdict(worse, "worse2")], []) == []  # no baseline, nothing to fall below


def test_on_a_single_engine_the_routing_gates_do_not_count_toward_a_partial_verdict(tmp_path):
    from gates.verdict import Verdict

    record = RecordBuilder().healthy().build(tmp_path / "run")
    only = ["replica_kill", "unhealthy_routing", "prefix_routing", "no_oom", "goodput"]
    verdict = evaluate(record, only=only)
    assert [r.applies for r in verdict.results] == [False, False, False, True, True]
    assert not verdict.is_partial and verdict.outcome is Outcome.PASS  # 3 of 5 not measurable, none applying
    again = Verdict.from_dict(verdict.to_dict())
    assert [r.applies for r in again.results] == [False, False, False, True, True] and not again.is_partial


def test_a_cancel_on_a_worker_that_died_is_released_by_its_death(tmp_path):
    """The router let the client go, then the worker died before its release was read."""
    b = RecordBuilder().healthy()
    b.request("gone", sent_s=30.0, ttft_s=0.1, e2e_s=1.0, status="cancelled", cancel_intended=True)
    b.event("admitted", 30.0, request_id="gone", worker=0, num_tokens=100, num_blocks=10)
    result = judge(b, tmp_path, "cancel_release")
    assert result.outcome is Outcome.FAIL  # never released
    b.event("worker_died", 31.5, worker=0, reason="killed by SIGKILL")
    result = judge(b, tmp_path, "cancel_release")
    assert result.outcome is Outcome.PASS and result.evidence["num_never_released"] == 0


def test_a_preempted_request_whose_worker_died_is_left_to_replica_kill(tmp_path):
    b = RecordBuilder().healthy()
    b.event("admitted", 30.0, request_id="gone", worker=1, num_tokens=100, num_blocks=10)
    b.event("preempted", 31.0, request_id="gone", worker=1, mode="recompute", num_blocks=10, num_tokens=50)
    assert judge(b, tmp_path, "preempted_complete").outcome is Outcome.FAIL  # never finished
    b.event("worker_died", 32.0, worker=1, reason="killed by SIGKILL")
    result = judge(b, tmp_path, "preempted_complete")
    assert result.outcome is Outcome.PASS and result.evidence["num_preempted"] == 2
