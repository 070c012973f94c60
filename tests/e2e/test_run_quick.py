"""`kvgate run --profile quick` end to end: it starts the engine, drives every scenario, and
leaves a complete run record (every table, every meta field), a verdict and a report."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profiles import get_profile
from record.run_record import RECORD_EVENT_COLUMNS, REQUEST_COLUMNS, SAMPLE_COLUMNS, TENANT_SAMPLE_COLUMNS
from reference_engine import config_digest, load_config, with_overrides
from reference_engine.memory import MemoryPlan
from tests.e2e.run_support import DEFAULT_CONFIG, STATUSES, kvgate_run, load_record

pytestmark = pytest.mark.slow

SENDERS = {
    "batch_mix",
    "cancel_storm",
    "long_output",
    "long_prompt",
    "multi_turn",
    "shared_prefix",
    "short_qa",
    "step_load",
    "tenant_burst",
}


def test_a_quick_run_writes_a_complete_record(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = kvgate_run("--policy", str(DEFAULT_CONFIG), "--profile", "quick", "--duration", "8", "--out", str(run_dir))
    record = load_record(result, run_dir)
    meta, overrides = record.meta, get_profile("quick").engine_overrides
    config = with_overrides(load_config(DEFAULT_CONFIG), overrides)  # the quick profile's small pool
    quick_blocks = MemoryPlan.from_config(config).num_blocks  # 3,584

    assert f"run record: {run_dir}" in result.stdout.replace("\n", "")
    assert (meta.mode, meta.run_id, meta.policy, meta.config_path) == ("live", "run", "lru", str(DEFAULT_CONFIG))
    assert meta.config_digest == config_digest(config) and meta.config["kv_cache"]["policy"] == "lru"
    assert set(meta.scenarios) == SENDERS | {"worker_kill", "tier_chaos", "router_chaos", "pd_transfer_chaos"}
    assert meta.target["kind"] == "reference" and meta.target["model"] == "llama-3.1-8b"
    assert meta.target["url"].startswith("http://127.0.0.1:")
    assert meta.pool is not None and meta.pool.num_blocks == quick_blocks and meta.pool.block_tokens == 16
    assert meta.live["engine_overrides"] == overrides and (run_dir / "engine_config.json").is_file()
    assert meta.watermarks["evict"] == 0.85 and set(meta.tenants) == set(config.tenants)
    assert meta.versions["locust"] and meta.hardware["num_cpus"] and meta.started_unix > 0
    assert meta.live["profile"] == "quick" and meta.live["locust_exit_code"] == 0 and meta.live["drained"]

    names = [p.name for p in meta.phases]
    assert names == ["baseline", "load", "cooldown"]
    for earlier, later in zip(meta.phases, meta.phases[1:]):
        assert earlier.start_s < earlier.end_s <= later.start_s
    assert meta.duration_s >= meta.phases[-1].end_s

    s = meta.signals
    assert s.client_requests and s.engine_events and s.engine_samples and s.tenant_samples and s.prometheus
    assert not s.worker_chaos  # one engine: worker_kill refused and stopped
    assert s.gpu_memory == (record.samples["gpu_mem_total_bytes"].notna().any())

    final = meta.final
    assert final["requests_in_engine"] == 0 and final["reservations_outstanding"] == 0
    assert final["orphan_blocks"] == 0 and final["live_blocks"] == final["retained_blocks"] >= final["pinned_blocks"]
    assert "num_evicted_cached_blocks" in final and "num_preemptions" in final
    assert {"recompute_tokens", "computed_tokens"} <= set(final) and final["computed_tokens"] > 0
    initial = meta.initial  # the same keys, before the baseline: nothing held but the pinned prefix
    assert set(initial) <= set(final) and initial["requests_in_engine"] == initial["pending_blocks"] == 0

    req = record.requests
    assert tuple(req.columns) == REQUEST_COLUMNS and req["request_id"].is_unique
    assert set(req["phase"]) == {"baseline", "load"}
    assert (req["phase"] == "baseline").sum() == get_profile("quick").baseline_requests
    assert set(req["scenario"]) == SENDERS | {"baseline"} and set(req["status"]) <= STATUSES
    ok = req[req["status"] == "ok"]
    assert ok["ttft_s"].notna().all() and ok["first_token_s"].notna().all()
    assert ((ok["first_token_s"] - ok["sent_s"] - ok["ttft_s"]).abs() < 1e-6).all()
    load = meta.phase("load")
    in_load = req[req["phase"] == "load"]
    assert (in_load["sent_s"] >= load.start_s).all() and (in_load["sent_s"] <= load.end_s).all()
    # batch beside interactive; in an 8 s run the interactive side may not have fired yet
    assert "batch" in set(req.loc[req["scenario"] == "batch_mix", "traffic_class"]) <= {"batch", "interactive"}
    assert (req["status"] == "cancelled").sum() > 0

    assert tuple(record.events.columns) == RECORD_EVENT_COLUMNS
    kinds = set(record.events["kind"])
    assert {"admitted", "first_token", "finished", "blocks_released", "cancel_received"} <= kinds
    assert (record.events["t_s"] >= 0).all() and record.events["t_s"].max() <= meta.duration_s
    assert set(ok["engine_request_id"]) <= set(record.events["request_id"])

    samples = record.samples
    assert tuple(samples.columns) == SAMPLE_COLUMNS and set(samples["source"]) == {"engine"}
    assert samples["t_s"].is_monotonic_increasing and samples["t_s"].max() >= meta.phase("cooldown").end_s - 1
    assert (samples["num_blocks"] == quick_blocks).all()
    ts = record.tenant_samples
    assert tuple(ts.columns) == TENANT_SAMPLE_COLUMNS and set(ts["tenant"]) == set(config.tenants)
    assert (ts["cap"] == 0.15).all() and set(ts["source"]) == {"engine", "client_estimate"}
    for source in ("engine", "client_estimate"):  # the engine's count, and the client's estimate beside it
        assert (ts["source"] == source).sum() == len(samples) * len(config.tenants), source
    assert meta.collectors["tenant_estimate"].available

    for name in ("verdict.json", "verdict.junit.xml", "report.html", "locust.log", "locust.html"):
        assert (run_dir / name).stat().st_size > 0
    assert not (run_dir / "locust_requests.csv").exists()
