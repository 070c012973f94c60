"""Replay with KV tiers: a slice of the shared conversation trace behind a pool too small for its
reuse. The host tier catches what the pool evicts and the hit ratio by tier shows it; a disk
tier behind a small host catches more; and the replay summary and the report carry the split."""

from pathlib import Path

from gates import evaluate, load_thresholds
from harness.replay.loaders import load_trace
from harness.replay.run import ReplaySettings, run_replay
from harness.replay.summary import ReplaySummary
from record.query import WHOLE_RUN, prefix_hit_rates_by_tier
from record.run_record import RunRecord
from reference_engine import load_config, with_overrides
from reports.sections.kv_usage import KvUsageSection
from reports.summary import summarize

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "mooncake" / "conversation_trace_head200.jsonl"
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "tiered.toml"
# 12 GiB = 6,144 blocks: a few Mooncake prompts fill it; tenants may take the whole pool
SMALL_POOL = {
    "hardware.kv_pool_gib": 12.0,
    "engine.max_num_seqs": 16,
    "engine.max_num_batched_tokens": 2048,
    **{f"tenants.{t}.max_kv_share": 1.0 for t in ("acme", "globex", "initech", "umbrella")},
}


def _replay(tmp_path: Path, name: str, **tiers: float) -> RunRecord:
    config = with_overrides(load_config(CONFIG), {**SMALL_POOL, **{f"tiers.{k}": v for k, v in tiers.items()}})
    result = run_replay(load_trace(TRACE, limit=60), config, ReplaySettings(), tmp_path / name)
    return RunRecord.load(result.run_dir)


def test_hit_ratio_by_tier_beats_the_gpu_alone(tmp_path):
    gpu_only = prefix_hit_rates_by_tier(_replay(tmp_path, "gpu", host_gib=0), WHOLE_RUN)
    host = _replay(tmp_path, "host", host_gib=64)
    both = _replay(tmp_path, "both", host_gib=2, disk_gib=64, disk_read_gbps=25)
    with_host, with_both = prefix_hit_rates_by_tier(host, WHOLE_RUN), prefix_hit_rates_by_tier(both, WHOLE_RUN)
    assert gpu_only is not None and with_host is not None and with_both is not None
    assert set(gpu_only) == {"gpu"}
    assert with_host["host"] > 0 and sum(with_host.values()) > sum(gpu_only.values())
    assert with_both["disk"] > 0 and sum(with_both.values()) > sum(gpu_only.values())
    # the tiers' own counters in the record agree with the events the ratio is read from
    final = host.meta.final["tiers"]["host"]
    loads = host.events[(host.events["kind"] == "tier_load") & (host.events["reason"] == "ok")]
    assert final["promoted"] == loads["num_blocks"].sum() and final["used_blocks"] > 0
    assert host.samples["host_tier_blocks"].max() > 0 and host.samples["disk_tier_blocks"].isna().all()
    chart = KvUsageSection().render(host, evaluate(host, load_thresholds()))
    assert "host tier used" in chart and "disk tier used" not in chart
    summary = ReplaySummary.from_record(host)
    assert summary.hit_rate_by_tier == with_host
    assert summarize(host).prefix_hit_ratio_by_tier is not None
