"""Calibration: the fit recovers known constants, agrees with the sim, and the CLI writes a
profile the sim executor loads."""

from __future__ import annotations

import tomllib

import pytest

pytest.importorskip("torch")

from harness.cli import main  # noqa: E402
from reference_engine import EngineConfig, with_overrides  # noqa: E402
from reference_engine.config import TrafficClass  # noqa: E402
from reference_engine.executors import calibrate as cal  # noqa: E402
from reference_engine.executors.base import ScheduledChunk, StepPlan  # noqa: E402
from reference_engine.executors.sim import SimExecutor  # noqa: E402
from reference_engine.memory import MemoryPlan  # noqa: E402
from reference_engine.request import Request  # noqa: E402

pytestmark = pytest.mark.torch


def sim_plan(**overrides):
    config = with_overrides(EngineConfig(), {"model.name": "llama-3.1-8b", "hardware.gpu": "h200", **overrides})
    return config, MemoryPlan.from_config(config)


def synthetic_points(plan, mfu, mbu, overhead_s):
    points = []
    for t in (256, 1024, 4096):
        cost = cal.prefill_cost(plan, t)
        points.append(cal.Point("prefill", t, 1, 0, cal.predict_s(cost, plan.gpu, mfu, mbu, overhead_s), cost))
    for b in (1, 8, 32, 128):
        cost = cal.decode_cost(plan, b, 2048)
        points.append(cal.Point("decode", b, b, 2048, cal.predict_s(cost, plan.gpu, mfu, mbu, overhead_s), cost))
    return points


def decode_plan(num_seqs: int, context: int) -> StepPlan:
    """A step in which `num_seqs` requests holding `context` KV tokens each decode one token."""
    chunks = []
    for i in range(num_seqs):
        r = Request(
            request_id=f"r{i}",
            tenant="t",
            traffic_class=TrafficClass.INTERACTIVE,
            num_prompt_tokens=context,
            max_new_tokens=10,
            arrival_s=0,
            output_token_ids=[7],
        )
        r.num_computed_tokens = context
        chunks.append(ScheduledChunk(r, 1))
    return StepPlan(chunks)


def test_predictions_are_the_sim_executors_step_times():
    config, plan = sim_plan(**{"sim.mfu": 0.5, "sim.mbu": 0.6, "sim.step_overhead_ms": 2.0})
    sim = SimExecutor(config, plan)
    decode = cal.predict_s(cal.decode_cost(plan, 16, 1000), plan.gpu, 0.5, 0.6, 0.002)
    assert decode == pytest.approx(sim.execute(decode_plan(16, 1000)).duration_s, rel=1e-9)
    prefill = cal.predict_s(cal.prefill_cost(plan, 2048), plan.gpu, 0.5, 0.6, 0.002)
    assert prefill == pytest.approx(sim.prefill_time_s(2048) + 0.002, rel=1e-9)


def test_fit_recovers_the_constants_that_produced_the_measurements():
    _, plan = sim_plan()
    profile = cal.fit_profile(synthetic_points(plan, 0.55, 0.72, 0.0015), plan.gpu)
    assert profile.mfu == pytest.approx(0.55, rel=1e-3)
    assert profile.mbu == pytest.approx(0.72, rel=1e-3)
    assert profile.step_overhead_ms == pytest.approx(1.5, rel=1e-3)
    assert profile.max_rel_error < 1e-3 and not profile.notes


def test_the_cli_measures_this_device_and_writes_a_profile_the_sim_loads(tmp_path):
    out = tmp_path / "profile.toml"
    rc = main(
        [
            "calibrate",
            "--executor",
            "torch",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--prefill",
            "16,64",
            "--batches",
            "1,2,4",
            "--context",
            "32",
            "--repeats",
            "1",
            "--threads",
            "1",
        ]
    )
    assert rc == 0
    profile = tomllib.loads(out.read_text())
    assert 0 < profile["mfu"] <= 1 and 0 < profile["mbu"] <= 1 and profile["step_overhead_ms"] >= 0
    cal_table = profile["calibration"]
    assert cal_table["model"] == "kvgate-tiny" and cal_table["device"] == "cpu"
    assert [p["tokens"] for p in cal_table["prefill"]] == [16, 64]
    assert [p["batch"] for p in cal_table["decode"]] == [1, 2, 4]
    config, plan = sim_plan(**{"sim.profile": str(out), "hardware.gpu": cal_table["gpu"]})
    sim = SimExecutor(config, plan)
    assert sim._overhead_s == pytest.approx(profile["step_overhead_ms"] / 1000)


def test_bad_sizes_are_a_usage_error(capsys):
    assert main(["calibrate", "--batches", "1,two"]) == 2
    assert "--batches" in capsys.readouterr().err
