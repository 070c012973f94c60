"""record/fleet.py: a replica's view of a record, the gaps in its metrics, the fleet's sums."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from record.fleet import (
    FLEET,
    describe_gaps,
    fleet_state,
    gaps_in,
    metrics_gaps,
    replica_names,
    replica_summary,
    replica_view,
)
from record.query import counter_change, counter_prefix_hit_rate, measured_hit_ratio, num_restarts, replica_hit_ratio
from tests.fixtures.records import RecordBuilder


def test_a_single_target_record_has_no_replicas(tmp_path: Path) -> None:
    record = RecordBuilder().healthy().build(tmp_path)
    assert replica_names(record) == [] and replica_summary(record).empty


def test_a_replicas_view_holds_its_samples_events_pool_and_run_counters_only(tmp_path: Path) -> None:
    builder = RecordBuilder().fleet().replica_sample("b", 40.0, missing=True)
    builder.event("engine_restart", 40.5, reason="health", replica="b").event(
        "log_match", 20.0, reason="x", replica="a"
    )
    builder.replica("b", **{**_row(builder, "b"), "final_free_blocks": 480, "prefix_cache_hits_tokens": 500.0})
    record = builder.build(tmp_path)
    view = replica_view(record, "b")
    assert set(view.samples.columns) == set(record.samples.columns)  # samples.csv's, without `replica`
    assert len(view.samples) == 99  # its 100 ticks, less the one its metrics missed
    assert list(view.events["kind"]) == ["engine_restart"]
    assert view.requests.empty  # the client cannot tell which replica served
    assert view.meta.initial["free_blocks"] == 500 and view.meta.final["free_blocks"] == 480
    assert "prefix_cache_hits_tokens" not in view.meta.initial  # so a counter's change is the run's increase
    assert counter_change(view.meta, "prefix_cache_hits_tokens") == 500.0
    assert counter_prefix_hit_rate(view.meta) == pytest.approx(0.05)
    assert view.meta.final["prefix_cache_reset_after_drain"] is True
    assert view.meta.signals.prometheus and not view.meta.signals.client_requests
    assert view.meta.collectors["kv_events"].available and view.meta.pool is None


def test_a_reference_workers_view_has_the_engines_events_of_that_worker(tmp_path: Path) -> None:
    builder = RecordBuilder().fleet().signals(engine_events=True)
    builder.replica("a", **{**_row(builder, "a"), "worker": 0}).replica("b", **{**_row(builder, "b"), "worker": 1})
    builder.event("oom", 30.0, worker="1").event("admitted", 31.0, worker="0", request_id="r1")
    record = builder.build(tmp_path)
    assert list(replica_view(record, "b").events["kind"]) == ["oom"]
    assert replica_view(record, "b").meta.signals.engine_events


def test_gaps_run_from_the_first_missed_tick_to_the_next_answer_or_the_end(tmp_path: Path) -> None:
    builder = RecordBuilder().fleet()
    for t in (20.0, 21.0, 22.0, 90.0):
        builder.replica_sample("b", t, missing=True)
    builder.rows["replica_samples"] = [
        r for r in builder.rows["replica_samples"] if r["t_s"] < 91 or r["replica"] == "a"
    ]
    record = builder.build(tmp_path)
    assert metrics_gaps(record, "a") == []
    gaps = metrics_gaps(record, "b")
    assert gaps == [(20.0, 23.0), (90.0, math.inf)]
    assert gaps_in(gaps, (10.0, 70.0)) == [(20.0, 23.0)]
    assert describe_gaps(gaps) == "t=20.0–23.0 s, t=90.0 s–end"


def test_the_fleet_sums_a_key_only_when_every_replica_has_it() -> None:
    a = {"num_blocks": 100, "live_blocks": 10, "free_blocks": 90, "usage": 0.1, "prefix_cache_reset_after_drain": True}
    b = {"num_blocks": 300, "live_blocks": 30, "usage": 0.1, "prefix_cache_reset_after_drain": False}
    fleet = fleet_state([a, b])
    assert fleet["num_blocks"] == 400 and fleet["live_blocks"] == 40 and "free_blocks" not in fleet
    assert fleet["usage"] == pytest.approx(0.1) and fleet["prefix_cache_reset_after_drain"] is False
    assert fleet_state([{"usage": 0.2}, {"usage": 0.4}])["usage"] == pytest.approx(0.3)  # no blocks: the mean
    assert fleet_state([]) == {}


def test_restarts_count_each_replicas_larger_witness_then_sum(tmp_path: Path) -> None:
    builder = RecordBuilder().fleet()
    builder.event("engine_restart", 30.0, reason="health", replica="a")
    builder.event("engine_restart", 30.2, reason="process_start_time", replica="a")  # the same restart, twice seen
    builder.event("engine_restart", 50.0, reason="process_start_time", replica="b")
    record = builder.build(tmp_path)
    assert num_restarts(record.events) == 2
    summary = replica_summary(record).set_index("replica")
    assert list(summary.index) == ["a", "b", FLEET]
    assert (summary.at["a", "restarts"], summary.at["b", "restarts"], summary.at[FLEET, "restarts"]) == (1, 1, 2)
    assert summary.at[FLEET, "prefix_hit_tokens"] == summary.at["a", "prefix_hit_tokens"] * 2
    assert summary.at["a", "prefix_hit_ratio"] == pytest.approx(0.2)
    assert summary.at["a", "peak_usage"] == pytest.approx(0.57)


def _row(builder: RecordBuilder, name: str) -> dict:
    row = next(r for r in builder.rows["replicas"] if r["replica"] == name)
    return {k: v for k, v in row.items() if k not in ("replica", "url")}


def test_the_loads_hit_ratio_comes_from_each_replicas_counters_so_far(tmp_path: Path) -> None:
    builder = RecordBuilder().fleet()
    for name, (before, after) in {"a": ((100.0, 50.0), (1100.0, 450.0)), "b": ((0.0, 0.0), (1000.0, 100.0))}.items():
        for t_s, (queries, hits) in ((9.0, before), (95.0, after)):
            row = next(r for r in builder.rows["replica_samples"] if (r["replica"], r["t_s"]) == (name, t_s))
            row.update(prefix_cache_queries_tokens=queries, prefix_cache_hits_tokens=hits)
    record = builder.build(tmp_path)
    # the load starts at 10 s: a hit 400 of 1,000, b 100 of 1,000 (the baseline's 50 of 100 left out)
    assert replica_hit_ratio(record.replica_samples, (10.0, math.inf)) == pytest.approx(0.25)
    assert measured_hit_ratio(record) == pytest.approx(0.25)
    assert measured_hit_ratio(replica_view(record, "a")) == pytest.approx(0.4)
