"""Helpers for torch executor tests: a tiny-model engine config and a virtual-clock run loop.

`KVGATE_TORCH_DEVICE` (default `cpu`) picks the device, so `bench/gpu_check.sh` runs the very
same tests on CUDA.
"""

from __future__ import annotations

import os
from typing import Any

from reference_engine import EngineConfig, EngineCore, VirtualClock, with_overrides
from reference_engine.memory import GIB

DEVICE = os.environ.get("KVGATE_TORCH_DEVICE", "cpu")
BLOCK_TOKENS = 16
TINY_FP32_BYTES_PER_TOKEN = 2 * 2 * 2 * 16 * 4  # K and V × 2 layers × 2 kv heads × head_dim 16 × fp32

# Rungs far enough apart for a 48-block pool and a step that grows by 4 blocks at most.
SPREAD_GUARD = {
    "warn_at_percent": 50,
    "admission_at_percent": 60,
    "evict_at_percent": 70,
    "pause_batch_prefill_at_percent": 80,
    "preempt_at_percent": 90,
    "reject_at_percent": 99,
}


def torch_config(num_blocks: int = 256, **overrides: Any) -> EngineConfig:
    """kvgate-tiny in fp32 on DEVICE, a pool of exactly `num_blocks` blocks, two sequences per
    step and a 32-token budget, modeled timing, one CPU thread (steady on a shared machine),
    admission off (tests force pressure on purpose)."""
    base: dict[str, Any] = {
        "model.name": "kvgate-tiny",
        "model.weight_dtype": "fp32",
        "model.kv_dtype": "fp32",
        "engine.executor": "torch",
        "torch.device": DEVICE,
        "torch.timing": "modeled",
        "torch.cpu_threads": 1,
        "hardware.kv_pool_gib": (num_blocks + 0.5) * BLOCK_TOKENS * TINY_FP32_BYTES_PER_TOKEN / GIB,
        "engine.max_num_seqs": 2,
        "engine.max_num_batched_tokens": 32,
        "kv_cache.guard": SPREAD_GUARD,
        "admission.enabled": False,
        "prefix_cache.public_prefixes": [],
        "tenants": {
            "acme": {"api_keys": ["sk-acme"], "max_kv_share": 1.0},
            "globex": {"api_keys": ["sk-globex"], "max_kv_share": 1.0},
        },
    }
    base.update({k.replace("__", "."): v for k, v in overrides.items()})
    return with_overrides(EngineConfig(), base)


def make_core(config: EngineConfig) -> EngineCore:
    return EngineCore(config, clock=VirtualClock())


def run_to_end(core: EngineCore, max_steps: int = 5_000) -> None:
    """Step on the virtual clock until no work is left."""
    for _ in range(max_steps):
        if not core.has_work():
            return
        core.clock.advance_to(core.step().t_end_s)
    raise AssertionError(f"still working after {max_steps} steps")
