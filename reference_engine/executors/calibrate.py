"""Calibrating the sim time model against the torch executor on the current device.

The sim prices a step as `max(flops / (peak · MFU), bytes / (HBM · MBU)) + overhead` with the
peak and HBM figures of the catalog GPU the config names (see `executors/sim.py`). Calibration
runs real steps of the torch executor and finds the three constants that make the sim reproduce
them, so a sim run on any machine mimics the measured device:

- **decode** (B sequences × 1 token at a context of L): memory-bound. Measured step time is
  regressed on the bytes the sim counts for it (weights + KV read + KV written); the slope is
  1 / effective bandwidth, the intercept the fixed per-step cost. `MBU = bandwidth / HBM`.
- **prefill** (T tokens, no cache): compute-bound. Time minus that fixed cost is regressed
  through the origin on the sim's FLOPs (2 · params · T + attention); `MFU = FLOP/s / peak`.

For a small model the "effective" figures are honest about what dominates: kernel launches and
Python per sequence, which appear as a large fixed cost and a low MBU/MFU. On a real GPU with a
model of realistic size they approach the linear-layer MFU and decode MBU the defaults assume.
The profile keeps every raw measurement with the sim's prediction for it, and the worst
relative error of the fit, so the reader can judge how well the sim mimics the device.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from reference_engine.catalog import GpuSpec
from reference_engine.config import TrafficClass
from reference_engine.executors.base import ScheduledChunk, StepPlan
from reference_engine.executors.torch_executor import TorchExecutor
from reference_engine.memory import MemoryPlan
from reference_engine.request import Request


@dataclass(frozen=True, slots=True)
class StepCost:
    """What the sim charges a step for: its FLOPs and the bytes it moves."""

    flops: float
    bytes: float


def step_cost(plan: MemoryPlan, new_tokens: int, attended_pairs: float, kv_read_tokens: float) -> StepCost:
    """The sim's accounting of a step (the same formula as `SimExecutor._step_s`)."""
    m = plan.model
    flops = 2 * m.num_params * new_tokens + 4 * m.num_layers * m.num_attention_heads * m.head_dim * attended_pairs
    return StepCost(flops, plan.weight_bytes + plan.bytes_per_token * (kv_read_tokens + new_tokens))


def prefill_cost(plan: MemoryPlan, num_tokens: int) -> StepCost:
    return step_cost(plan, num_tokens, num_tokens * (num_tokens + 1) / 2, 0)


def decode_cost(plan: MemoryPlan, batch: int, context_tokens: int) -> StepCost:
    return step_cost(plan, batch, batch * (context_tokens + 1), batch * context_tokens)


@dataclass(frozen=True, slots=True)
class Point:
    """One measured step: prefill of `tokens` (batch 1) or decode of `batch` sequences."""

    kind: str  # "prefill" | "decode"
    tokens: int
    batch: int
    context_tokens: int
    time_s: float
    cost: StepCost


@dataclass(frozen=True, slots=True)
class SimProfile:
    """What `kvgate calibrate` fits and writes as a sim profile: the three constants `SimExecutor`
    reads ([sim] profile), with every measured step and the sim's prediction for it."""

    mfu: float
    mbu: float
    step_overhead_ms: float
    gpu: GpuSpec
    points: list[Point]
    predicted_s: list[float]
    notes: list[str] = field(default_factory=list)

    @property
    def max_rel_error(self) -> float:
        return max(abs(p - m.time_s) / m.time_s for p, m in zip(self.predicted_s, self.points))


def _request(i: int, prompt_tokens: int, computed: int, first_block: int, block_tokens: int) -> Request:
    r = Request(
        request_id=f"calibrate-{i}",
        tenant="calibrate",
        traffic_class=TrafficClass.BATCH,
        num_prompt_tokens=prompt_tokens,
        max_new_tokens=1,
        arrival_s=0.0,
        prompt_token_ids=[5 + (i * 7919 + j) % 4000 for j in range(prompt_tokens)],
    )
    r.num_computed_tokens = computed
    r.block_ids = list(range(first_block, first_block + -(-prompt_tokens // block_tokens)))
    return r


def blocks_needed(
    block_tokens: int, prefill_tokens: Sequence[int], decode_batches: Sequence[int], context_tokens: int
) -> int:
    """The pool a sweep needs: the largest prefill, or the largest decode batch at its context."""
    per_seq = -(-(context_tokens + 1) // block_tokens)
    return max(-(-max(prefill_tokens) // block_tokens), max(decode_batches) * per_seq)


def _time_step(executor: TorchExecutor, plan: StepPlan, repeats: int) -> float:
    """The fastest of `repeats` runs after a warm-up: other processes on the machine only ever
    add time, so the minimum is the best estimate of what the device itself needs."""
    executor.execute(plan)  # warm-up: allocator, kernels, caches
    return min(executor.execute(plan).duration_s for _ in range(repeats))


def measure(
    executor: TorchExecutor,
    plan: MemoryPlan,
    prefill_tokens: Sequence[int],
    decode_batches: Sequence[int],
    context_tokens: int,
    repeats: int = 5,
) -> list[Point]:
    """Time real steps on the executor. It must use measured timing and a pool of at least
    `blocks_needed(...)` blocks; the KV written is scratch (no engine owns these blocks)."""
    bt = plan.block_tokens
    points = []
    for t in prefill_tokens:
        r = _request(0, t, 0, 0, bt)
        step = StepPlan(chunks=[ScheduledChunk(r, t)])
        points.append(Point("prefill", t, 1, 0, _time_step(executor, step, repeats), prefill_cost(plan, t)))
    per_seq = -(-(context_tokens + 1) // bt)
    for b in decode_batches:
        chunks = [ScheduledChunk(_request(i, context_tokens + 1, context_tokens, i * per_seq, bt), 1) for i in range(b)]
        time_s = _time_step(executor, StepPlan(chunks=chunks), repeats)
        points.append(Point("decode", b, b, context_tokens, time_s, decode_cost(plan, b, context_tokens)))
    return points


def _fit_line(x: Sequence[float], y: Sequence[float], *, through_origin: bool = False) -> tuple[float, float]:
    """Slope and intercept (≥ 0) minimising the *relative* squared error: least squares weighted
    by 1 / y², since step times span orders of magnitude. The line goes through the origin when
    asked to, or when the best line would have a negative intercept (a negative fixed cost)."""
    w = [1.0 / (b * b) for b in y]
    if not through_origin:
        sw = sum(w)
        mx = sum(wi * a for wi, a in zip(w, x)) / sw
        my = sum(wi * b for wi, b in zip(w, y)) / sw
        sxx = sum(wi * (a - mx) ** 2 for wi, a in zip(w, x))
        if sxx > 0:
            slope = sum(wi * (a - mx) * (b - my) for wi, a, b in zip(w, x, y)) / sxx
            if my - slope * mx >= 0:
                return slope, my - slope * mx
    return sum(wi * a * b for wi, a, b in zip(w, x, y)) / sum(wi * a * a for wi, a in zip(w, x)), 0.0


def predict_s(cost: StepCost, gpu: GpuSpec, mfu: float, mbu: float, overhead_s: float) -> float:
    """The sim's step time for a cost under these constants."""
    return max(cost.flops / (gpu.bf16_tflops * 1e12 * mfu), cost.bytes / (gpu.hbm_gbps * 1e9 * mbu)) + overhead_s


def fit_profile(points: Sequence[Point], gpu: GpuSpec) -> SimProfile:
    """MFU, MBU and the per-step overhead that make the sim (on `gpu`) reproduce `points`."""
    notes = []
    decode = [p for p in points if p.kind == "decode"]
    prefill = [p for p in points if p.kind == "prefill"]
    if len(decode) < 2 or not prefill:
        raise ValueError("calibration needs at least two decode batch sizes and one prefill size")
    slope, overhead_s = _fit_line([p.cost.bytes for p in decode], [p.time_s for p in decode])
    if overhead_s == 0.0:
        notes.append("decode time grows faster than the bytes it moves (per-sequence costs): no fixed cost fitted")
    mbu = 1.0 / (slope * gpu.hbm_gbps * 1e9) if slope > 0 else 1.0
    if slope <= 0:
        notes.append("decode time does not grow with bytes moved in the measured range: MBU set to 1")
    sec_per_flop, _ = _fit_line(
        [p.cost.flops for p in prefill], [max(p.time_s - overhead_s, 1e-9) for p in prefill], through_origin=True
    )
    mfu = 1.0 / (sec_per_flop * gpu.bf16_tflops * 1e12) if sec_per_flop > 0 else 1.0
    if sec_per_flop <= 0:
        notes.append("prefill is no slower than the fixed cost in the measured range: MFU set to 1")
    for name, value in (("MFU", mfu), ("MBU", mbu)):
        if value > 1.0:
            notes.append(
                f"measured {name} {value:.3f} exceeds the peak of {gpu.name}: clamped to 1 "
                f"(calibrate against the GPU this device is, with --gpu)"
            )
    mfu, mbu = min(mfu, 1.0), min(mbu, 1.0)
    predicted = [predict_s(p.cost, gpu, mfu, mbu, overhead_s) for p in points]
    return SimProfile(
        mfu=mfu,
        mbu=mbu,
        step_overhead_ms=overhead_s * 1000,
        gpu=gpu,
        points=list(points),
        predicted_s=predicted,
        notes=notes,
    )


def profile_toml(profile: SimProfile, meta: dict[str, str | int | float]) -> str:
    """The profile as TOML: the three constants `SimExecutor` reads, then every measurement."""
    lines = [
        '# Sim profile written by `kvgate calibrate`; load it with [sim] profile = "<this file>".',
        f"# MFU and MBU are fractions of the peaks of the catalog GPU {profile.gpu.name!r}: run the",
        f'# sim with hardware.gpu = "{profile.gpu.name}" to mimic the measured device.',
        f"mfu = {profile.mfu:.6g}",
        f"mbu = {profile.mbu:.6g}",
        f"step_overhead_ms = {profile.step_overhead_ms:.6g}",
        "",
        "[calibration]",
        f'gpu = "{profile.gpu.name}"',
        f"max_rel_error = {profile.max_rel_error:.4f}",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in meta.items()]  # JSON scalars are valid TOML values
    lines.append(f"notes = {json.dumps(profile.notes)}")
    for p, pred in zip(profile.points, profile.predicted_s):
        lines += [
            "",
            f"[[calibration.{p.kind}]]",
            f"tokens = {p.tokens}",
            f"batch = {p.batch}",
            f"context_tokens = {p.context_tokens}",
            f"measured_ms = {p.time_s * 1000:.4f}",
            f"predicted_ms = {pred * 1000:.4f}",
            f"flops = {p.cost.flops:.6g}",
            f"bytes = {p.cost.bytes:.6g}",
        ]
    return "\n".join(lines) + "\n"
