"""Event-driven replay (plans held for several steps) writes exactly the record step-by-step
replay writes.

Every table of the run record is compared whole: per-request first-token and finish times, token
counts, statuses and rejection codes (requests.csv), every event with its time and columns
(events.csv), and the samples. Configs: every shipped one on a slice of the shared trace, the
default one on the whole slice, and a small pool under pressure for the exact policies (lru,
multi_queue, value_density) and each baseline, so queueing, deadlines, watermarks, evictions,
preemption and OOM all happen.
"""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from harness.replay.loaders import load_trace
from harness.replay.run import ReplaySettings, run_replay
from record.run_record import TABLES, RunRecord
from reference_engine import EngineCore, load_config, with_overrides
from reference_engine.core.kv_manager import KVCacheManager

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
MOONCAKE = TRACES / "mooncake" / "conversation_trace_head200.jsonl"
AZURE = TRACES / "azure" / "AzureLLMInferenceTrace_conv_head200.csv"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DEFAULT_CONFIG = CONFIGS / "default.toml"
# every policy config and baseline (configs/broken/ is built to fail a gate, not a policy) that is
# one engine: a P/D pair replays through harness/replay/pd.py, its own tests' (tests/unit/reference_engine/test_pd.py)
EVERY_CONFIG = sorted(
    p for p in [*CONFIGS.glob("*.toml"), *CONFIGS.glob("baselines/*.toml")] if not load_config(p).pd.enabled
)

# 12 GiB = 6,144 blocks: eight Mooncake prompts fill it; tenants may take the whole pool.
PRESSURE = {
    "hardware.kv_pool_gib": 12.0,
    "engine.max_num_seqs": 16,
    "engine.max_num_batched_tokens": 2048,
    **{f"tenants.{t}.max_kv_share": 1.0 for t in ("acme", "globex", "initech", "umbrella")},
}


def replay_both(tmp_path: Path, trace, config, settings: ReplaySettings | None = None):
    settings = settings or ReplaySettings()
    records, events = [], []
    for step_by_step in (False, True):
        s = ReplaySettings(**{**settings.__dict__, "step_by_step": step_by_step})
        result = run_replay(trace, config, s, tmp_path / ("steps" if step_by_step else "events"))
        records.append(RunRecord.load(result.run_dir))
        events.append(result.stats.num_iterations)
    return records, events


@contextmanager
def kept_tokens() -> Iterator[list[tuple[str, int, str]]]:
    """Every compaction applied inside the block: (request, tokens computed, a digest of the KV
    indices kept). The record says how many tokens a compaction dropped, not which."""
    compact, kept = KVCacheManager.compact, []

    def spy(self, r, keep, *args):
        kept.append((r.request_id, r.num_computed_tokens, hashlib.blake2b(keep.tobytes(), digest_size=16).hexdigest()))
        return compact(self, r, keep, *args)

    KVCacheManager.compact = spy
    try:
        yield kept
    finally:
        KVCacheManager.compact = compact


def assert_same_record(fast: RunRecord, slow: RunRecord) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(fast, table), getattr(slow, table), check_exact=True, obj=table)
    assert fast.meta.final == slow.meta.final


@pytest.mark.parametrize("policy", ["lru", "vllm_like", "none", "multi_queue", "value_density"])
def test_event_driven_equals_step_by_step_under_pressure(tmp_path, policy):
    config = with_overrides(load_config(DEFAULT_CONFIG), {**PRESSURE, "kv_cache.policy": policy})
    (fast, slow), (fast_calls, slow_calls) = replay_both(tmp_path, load_trace(MOONCAKE, limit=100), config)
    assert_same_record(fast, slow)
    kinds = set(fast.events["kind"])
    assert {"first_token", "finished", "watermark"} <= kinds
    pressure = {"vllm_like": "preempted", "none": "oom"}.get(policy, "queued")
    assert pressure in kinds  # the pressure was real
    assert fast_calls <= slow_calls


def test_tiers_replay_fused_exactly_as_step_by_step(tmp_path):
    """A small pool in front of a host and a disk tier, with slow disk writes and injected load
    failures: demotions (at each eviction's time, step boundaries included), loads that end
    between steps, fallbacks to recompute, the same record either way."""
    overrides = {
        **PRESSURE,
        "tiers.host_gib": 1.0,
        "tiers.disk_gib": 16.0,
        "tiers.disk_write_gbps": 0.5,
        "tiers.load_failure_rate": 0.2,
    }
    config = with_overrides(load_config(CONFIGS / "tiered.toml"), overrides)
    (fast, slow), (fast_calls, slow_calls) = replay_both(tmp_path, load_trace(MOONCAKE, limit=100), config)
    assert_same_record(fast, slow)
    loads = fast.events[fast.events["kind"] == "tier_load"]
    assert {("host", "ok"), ("disk", "ok")} <= set(zip(loads["mode"], loads["reason"]))
    assert "failed" in set(loads["reason"])
    assert fast_calls < slow_calls


def spy_steps(monkeypatch) -> list:
    """Every `StepOutput` the engine returns while the test runs."""
    step, outputs = EngineCore.step, []

    def spy(self, *args):
        out = step(self, *args)
        outputs.append(out)
        return out

    monkeypatch.setattr(EngineCore, "step", spy)
    return outputs


def test_event_driven_equals_step_by_step_on_the_default_config(tmp_path, monkeypatch):
    """The whole slice: it once caught fused runs letting a finished request's freed blocks feed
    the next request's growth (same live blocks, a different cached/free split in samples.csv).
    Samples answered by plans of several steps are part of it, most of them at a boundary inside
    the plan (a snapshot taken while `update` applies its steps)."""
    outputs = spy_steps(monkeypatch)
    (fast, slow), (fast_calls, slow_calls) = replay_both(tmp_path, load_trace(MOONCAKE), load_config(DEFAULT_CONFIG))
    assert_same_record(fast, slow)
    assert sum(len(out.observations) for out in outputs if out.num_steps > 1) > 50
    assert sum(snap.t_s < out.t_end_s for out in outputs for _, snap in out.observations) > 50
    assert (fast.requests["status"] == "ok").sum() > 100
    assert fast_calls * 5 < slow_calls  # plans really held for several steps


def test_streamingllm_plans_hold_up_to_their_compactions(tmp_path, monkeypatch):
    """A token-level policy whose compactions follow from KV lengths holds plans for several
    steps up to the step that compacts (events, releases, moves at its end), as step by step
    would, and samples they run through are answered with snapshots taken at the boundary."""
    from reference_engine.core.scheduler import Scheduler

    update, compacting = Scheduler.update, []

    def spy(self, plan, outcome, *args):
        before = self.approximated_tokens
        out = update(self, plan, outcome, *args)
        if outcome.num_steps > 1:
            compacting.append(self.approximated_tokens - before)
        return out

    monkeypatch.setattr(Scheduler, "update", spy)
    outputs = spy_steps(monkeypatch)
    # the engine's default 2,048-token window: compactions on most of the trace's requests
    config = with_overrides(
        load_config(DEFAULT_CONFIG.with_name("streamingllm.toml")), {"streamingllm.sliding_window_tokens": 2048}
    )
    (fast, slow), (fast_calls, slow_calls) = replay_both(tmp_path, load_trace(MOONCAKE), config)
    assert_same_record(fast, slow)
    assert (fast.events["kind"] == "approximated").sum() > 100
    assert fast_calls < slow_calls and sum(1 for tokens in compacting if tokens) > 20
    assert sum(len(out.observations) for out in outputs if out.num_steps > 1) > 20


def test_h2o_plans_hold_with_its_scores_kept_up_float_for_float(tmp_path, monkeypatch):
    """h2o's compactions come when lengths say; which tokens they keep follows its scores, which
    a plan of several steps brings up to date at once. The record only shows how many tokens
    were dropped, so every plan (the kept indices and the scores they were chosen by) and every
    request's final scores are compared too, byte for byte."""
    from reference_engine.policies.h2o import H2oCompressor

    plan_keep, forget = H2oCompressor.plan_keep, H2oCompressor.forget
    seen: dict[int, list] = {}  # compressor (one per replay) -> what it decided and learnt
    held = []

    def spy_plan(self, r, attention, protected, num_steps=1):
        keep = plan_keep(self, r, attention, protected, num_steps)
        held.append(num_steps)
        if keep is not None:
            seen.setdefault(id(self), []).append((r.request_id, keep.tobytes(), self.scores(r.request_id).tobytes()))
        return keep

    def spy_forget(self, request_id):
        scores = self.scores(request_id)
        if scores is not None:
            seen.setdefault(id(self), []).append((request_id, scores.tobytes()))
        forget(self, request_id)

    monkeypatch.setattr(H2oCompressor, "plan_keep", spy_plan)
    monkeypatch.setattr(H2oCompressor, "forget", spy_forget)
    # the engine's default 2,048 tokens before compressing: compactions on most of the trace's requests
    config = with_overrides(load_config(DEFAULT_CONFIG.with_name("h2o.toml")), {"h2o.min_tokens_to_compress": 2048})
    (fast, slow), (fast_calls, slow_calls) = replay_both(tmp_path, load_trace(MOONCAKE), config)
    assert_same_record(fast, slow)
    fast_seen, slow_seen = seen.values()
    assert sorted(fast_seen) == sorted(slow_seen)
    assert sum(len(entry) == 3 for entry in fast_seen) > 100  # compactions, each with its plan
    assert sum(1 for n in held if n > 1) > 100 and fast_calls < slow_calls


@pytest.mark.parametrize("config_path", EVERY_CONFIG, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_config_replays_fused_exactly_as_step_by_step(tmp_path, config_path):
    """Every shipped config, as shipped, on a slice of the shared trace: the same record, table
    for table and float for float, and every compaction keeping the same KV tokens."""
    trace, config, kept = load_trace(MOONCAKE, limit=80), load_config(config_path), []
    records, calls = [], []
    for step_by_step in (False, True):
        with kept_tokens() as compactions:
            result = run_replay(
                trace,
                config,
                ReplaySettings(step_by_step=step_by_step),
                tmp_path / ("steps" if step_by_step else "fused"),
            )
        records.append(RunRecord.load(result.run_dir))
        calls.append(result.stats.num_iterations)
        kept.append(compactions)
    assert_same_record(*records)
    assert kept[0] == kept[1]
    assert calls[0] < calls[1]  # runs were fused
    assert (records[0].requests["status"] == "ok").sum() > 30
    assert bool(kept[0]) == (config_path.stem in ("streamingllm", "h2o", "zones"))  # token-level configs compact


def test_event_driven_equals_step_by_step_on_azure_compressed_in_time(tmp_path):
    (fast, slow), _ = replay_both(
        tmp_path,
        load_trace(AZURE, limit=120),
        load_config(DEFAULT_CONFIG),
        ReplaySettings(rate_scale=4.0, tenants="round_robin"),
    )
    assert_same_record(fast, slow)
    assert len(fast.requests) == 120


def test_zones_under_pressure_replay_fused_exactly_as_step_by_step(tmp_path):
    """zones adds two rules to what a plan must respect: the window rule (a compressor, as
    streamingllm's) and the free buffer, which evicts cached blocks at a step's start once fewer
    than its share are free: a plan holds only while its later steps leave the buffer whole."""
    overrides = {**PRESSURE, "kv_cache.policy": "zones", "zones.sliding_window_tokens": 4096}
    config = with_overrides(load_config(DEFAULT_CONFIG), overrides)
    (fast, slow), (fast_calls, slow_calls) = replay_both(tmp_path, load_trace(MOONCAKE, limit=140), config)
    assert_same_record(fast, slow)
    stats = fast.meta.final["policy_stats"]
    assert stats["buffer_evicted_blocks"] > 100 and stats["approximated_tokens"] > 0
    assert (fast.events["kind"] == "approximated").sum() > 10
    assert fast_calls < slow_calls
