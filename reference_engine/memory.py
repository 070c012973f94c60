"""The memory plan: how many KV blocks a (model, GPU, config) gets, and what one block costs.

    bytes_per_token = 2 × layers × kv_heads × head_dim × dtype_bytes × safety
    pool_bytes      = kv_pool_gib                                 if the config pins it
                    = GPU memory × utilisation − weights − workspace   otherwise
    num_blocks      = floor(pool_bytes / (block_tokens × bytes_per_token))

The default (Llama-3.1-8B bf16 on an H100-SXM, 0.90 utilisation, 4 GiB workspace) leaves
52.7 GiB, i.e. 26,982 blocks of 16 tokens: the ≈ 52 GiB pool operators plan with for this model
and GPU (docs/background.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from record.errors import ConfigError
from reference_engine.catalog import DType, GpuSpec, ModelSpec, get_gpu, get_model
from reference_engine.config import EngineConfig

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    model: ModelSpec
    gpu: GpuSpec
    block_tokens: int
    bytes_per_token: float
    pool_bytes: float
    num_blocks: int
    weight_bytes: float
    weight_dtype: DType
    kv_dtype: DType

    @property
    def bytes_per_block(self) -> float:
        return self.bytes_per_token * self.block_tokens

    @property
    def model_digest(self) -> str:
        return self.model.digest(self.weight_dtype, self.kv_dtype)

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_tokens

    def blocks_for_tokens(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_tokens)

    @classmethod
    def from_config(cls, config: EngineConfig) -> MemoryPlan:
        model = get_model(config.model.name)
        gpu = get_gpu(config.hardware.gpu)
        bpt = model.kv_bytes_per_token(config.model.kv_dtype) * config.engine.kv_bytes_safety
        weights = model.weight_bytes(config.model.weight_dtype)
        hw = config.hardware
        if hw.kv_pool_gib is not None:
            pool = hw.kv_pool_gib * GIB
        else:
            pool = gpu.memory_bytes * hw.gpu_memory_utilization - weights - hw.workspace_gib * GIB
        if pool <= 0:
            raise ConfigError(
                f"{model.name} ({weights / GIB:.1f} GiB of weights) leaves no KV pool on {gpu.name} "
                f"at gpu_memory_utilization {hw.gpu_memory_utilization}; use a larger GPU, fp8 weights, "
                f"or set hardware.kv_pool_gib"
            )
        block = config.engine.block_tokens
        num_blocks = math.floor(pool / (bpt * block))
        if num_blocks < 1:
            raise ConfigError(f"the KV pool ({pool / GIB:.3f} GiB) holds no block of {block} tokens")
        return cls(
            model=model,
            gpu=gpu,
            block_tokens=block,
            bytes_per_token=bpt,
            pool_bytes=pool,
            num_blocks=num_blocks,
            weight_bytes=weights,
            weight_dtype=config.model.weight_dtype,
            kv_dtype=config.model.kv_dtype,
        )
