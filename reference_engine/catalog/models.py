"""Model catalog: the architecture figures that decide KV memory and step time.

Every figure comes from the model's published `config.json` on Hugging Face (named per entry).
KV bytes per token are *derived* (`ModelSpec.kv_bytes_per_token`), never typed in:

    bytes_per_token = 2 (K and V) × layers × kv_heads × head_dim × dtype_bytes

which gives the familiar 128 KiB (Llama-3-8B, bf16), 56 KiB (Qwen2.5-7B), 320 KiB (Llama-3-70B)
and 512 KiB (Llama-2-7B, no GQA).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from enum import Enum

from record.errors import UnknownNameError


class DType(str, Enum):
    """Storage types for weights and KV cache, with their size in bytes."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    FP32 = "fp32"

    @property
    def num_bytes(self) -> int:
        return {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}[self.value]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer as far as KV memory and the roofline time model care."""

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    num_params: float  # total parameters
    max_context_tokens: int
    vocab_size: int
    sliding_window_tokens: int | None = None  # the model's own attention window, if it has one
    intermediate_size: int | None = None  # SwiGLU width: what the torch executor needs to build it
    source: str = ""

    def kv_bytes_per_token(self, kv_dtype: DType) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * kv_dtype.num_bytes

    def weight_bytes(self, dtype: DType) -> float:
        return self.num_params * dtype.num_bytes

    def digest(self, weight_dtype: DType, kv_dtype: DType) -> str:
        """Identity of the model as served: architecture + dtypes. A config's `binding.model_digest`
        must equal it, so thresholds tuned for one model are never applied to another. Every field
        but `source` counts: a field added later is part of the identity without anyone listing it."""
        shape = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "source"]
        return hashlib.sha256(repr((shape, weight_dtype.value, kv_dtype.value)).encode()).hexdigest()[:12]


def _llama3(
    name: str, layers: int, heads: int, hidden: int, inter: int, params: float, ctx: int, src: str
) -> ModelSpec:
    return ModelSpec(
        name=name,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=hidden,
        num_params=params,
        max_context_tokens=ctx,
        vocab_size=128_256,
        intermediate_size=inter,
        source=src,
    )


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        # meta-llama/Meta-Llama-3-8B config.json: 32 layers, 32 heads, 8 KV heads, hidden 4096,
        # intermediate_size 14336, max_position_embeddings 8192; 8.03 B parameters (model card).
        _llama3("llama-3-8b", 32, 32, 4096, 14_336, 8.03e9, 8_192, "hf.co/meta-llama/Meta-Llama-3-8B config.json"),
        # meta-llama/Llama-3.1-8B: same shape, max_position_embeddings 131072.
        _llama3("llama-3.1-8b", 32, 32, 4096, 14_336, 8.03e9, 131_072, "hf.co/meta-llama/Llama-3.1-8B config.json"),
        # meta-llama/Meta-Llama-3-70B: 80 layers, 64 heads, 8 KV heads, hidden 8192, intermediate_size
        # 28672; 70.6 B parameters.
        _llama3("llama-3-70b", 80, 64, 8192, 28_672, 70.6e9, 8_192, "hf.co/meta-llama/Meta-Llama-3-70B config.json"),
        _llama3("llama-3.1-70b", 80, 64, 8192, 28_672, 70.6e9, 131_072, "hf.co/meta-llama/Llama-3.1-70B config.json"),
        # Qwen/Qwen2.5-7B-Instruct config.json: 28 layers, 28 heads, 4 KV heads, hidden 3584,
        # max_position_embeddings 32768 (131072 only with YaRN scaling); 7.62 B parameters.
        ModelSpec(
            name="qwen2.5-7b",
            num_layers=28,
            num_attention_heads=28,
            num_kv_heads=4,
            head_dim=128,
            hidden_size=3584,
            num_params=7.62e9,
            max_context_tokens=32_768,
            vocab_size=152_064,
            source="hf.co/Qwen/Qwen2.5-7B-Instruct config.json",
        ),
        # meta-llama/Llama-2-7b-hf config.json: 32 layers, 32 heads, no GQA (32 KV heads), hidden 4096,
        # intermediate_size 11008, max_position_embeddings 4096; 6.74 B parameters.
        ModelSpec(
            name="llama-2-7b",
            num_layers=32,
            num_attention_heads=32,
            num_kv_heads=32,
            head_dim=128,
            hidden_size=4096,
            num_params=6.74e9,
            max_context_tokens=4_096,
            vocab_size=32_000,
            intermediate_size=11_008,
            source="hf.co/meta-llama/Llama-2-7b-hf config.json",
        ),
        # mistralai/Mistral-7B-v0.1 config.json: 32 layers, 32 heads, 8 KV heads, hidden 4096,
        # intermediate_size 14336, sliding_window 4096, max_position_embeddings 32768; 7.24 B parameters.
        ModelSpec(
            name="mistral-7b-v0.1",
            num_layers=32,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            hidden_size=4096,
            num_params=7.24e9,
            max_context_tokens=32_768,
            vocab_size=32_000,
            sliding_window_tokens=4_096,
            intermediate_size=14_336,
            source="hf.co/mistralai/Mistral-7B-v0.1 config.json",
        ),
        # kvgate's own Llama-style models for the torch executor (seeded random weights), sized so the
        # engine tokenizer's ids fit the vocabulary. Parameters are exact: embeddings + lm_head
        # (2 · vocab · hidden) + per layer (q, o: hidden²; k, v: hidden · kv_heads · head_dim;
        # gate, up, down: hidden · intermediate; two norms) + the final norm. KV per token (fp32):
        # tiny 512 B, small 16 KiB.
        ModelSpec(
            name="kvgate-tiny",
            num_layers=2,
            num_attention_heads=4,
            num_kv_heads=2,
            head_dim=16,
            hidden_size=64,
            num_params=598_336,
            max_context_tokens=4_096,
            vocab_size=4_096,
            intermediate_size=128,
            source="kvgate: a test-sized model (seconds on a CPU)",
        ),
        ModelSpec(
            name="kvgate-small",
            num_layers=8,
            num_attention_heads=16,
            num_kv_heads=4,
            head_dim=64,
            hidden_size=1024,
            num_params=98_583_552,
            max_context_tokens=8_192,
            vocab_size=4_096,
            intermediate_size=2_816,
            source="kvgate: a calibration-sized model (a GPU's worth of work)",
        ),
    )
}


def get_model(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownNameError("model", name, MODELS) from None
