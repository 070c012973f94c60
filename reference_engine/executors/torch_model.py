"""A Llama-style decoder — RMSNorm, rotary positions, grouped-query attention, SwiGLU — whose
attention is a pluggable backend.

The model knows nothing about paging: each layer hands the step's new queries, keys and values
(rotary positions already applied) to an `AttentionBackend`, which stores the keys and values
wherever it keeps them and returns the attention output. The serving backend is the paged KV
cache (`torch_attention.PagedAttention`); the reference backend recomputes a whole sequence
densely (`torch_attention.DenseAttention`). Keys are cached *after* RoPE, so a cached token keeps
the position it was computed at even when a token-level policy drops blocks before it.

Module and parameter names follow Hugging Face's `LlamaForCausalLM` (without the `model.`
prefix), so a local checkpoint loads with a plain `load_state_dict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from record.errors import ConfigError
from reference_engine.catalog import ModelSpec


@dataclass(frozen=True, slots=True)
class DecoderShape:
    """Everything needed to build the decoder; the KV-relevant fields mirror `ModelSpec`."""

    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    rope_scaling: Mapping[str, Any] | None = field(default=None, hash=False)

    @classmethod
    def from_spec(cls, spec: ModelSpec, rope_theta: float, norm_eps: float) -> DecoderShape:
        if spec.intermediate_size is None:
            raise ConfigError(
                f"model {spec.name!r} has no intermediate_size in the catalog, so the torch executor "
                f"cannot build it; use a kvgate-* model or set torch.checkpoint"
            )
        return cls(
            num_layers=spec.num_layers,
            hidden_size=spec.hidden_size,
            num_heads=spec.num_attention_heads,
            num_kv_heads=spec.num_kv_heads,
            head_dim=spec.head_dim,
            intermediate_size=spec.intermediate_size,
            vocab_size=spec.vocab_size,
            rope_theta=rope_theta,
            norm_eps=norm_eps,
        )

    @property
    def num_params(self) -> int:
        attn = 2 * self.hidden_size * (self.num_heads + self.num_kv_heads) * self.head_dim
        layer = attn + 3 * self.hidden_size * self.intermediate_size + 2 * self.hidden_size
        heads = 1 if self.tie_word_embeddings else 2
        return heads * self.vocab_size * self.hidden_size + self.num_layers * layer + self.hidden_size


class AttentionBackend(Protocol):
    """Where keys and values live. Called once per layer per forward pass."""

    def __call__(self, layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """q [T, heads, head_dim], k and v [T, kv_heads, head_dim] of the T new tokens, in the
        token order of the forward pass; returns the attention output [T, heads, head_dim]."""
        ...


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope_inv_freq(head_dim: int, theta: float, scaling: Mapping[str, Any] | None) -> Tensor:
    """Rotary frequencies, with Llama 3's long-context rescaling when the checkpoint asks for it."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if not scaling:
        return inv_freq.float()
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind != "llama3":
        raise ConfigError(f"rope_scaling type {kind!r} is not supported by the torch executor (only 'llama3')")
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_ctx = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_ctx / low, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    medium = (wavelen >= old_ctx / high) & (wavelen <= old_ctx / low)
    scaled = torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return scaled.float()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [T, heads, head_dim]; cos/sin [T, head_dim]. Hugging Face's rotate-half convention."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x.float() * cos[:, None] + rotated.float() * sin[:, None]).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, s: DecoderShape) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = s.num_heads, s.num_kv_heads, s.head_dim
        self.q_proj = nn.Linear(s.hidden_size, s.num_heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, s.num_kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, s.num_kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.num_heads * s.head_dim, s.hidden_size, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, layer: int, attend: AttentionBackend) -> Tensor:
        t = x.shape[0]
        q = apply_rope(self.q_proj(x).view(t, self.num_heads, self.head_dim), cos, sin)
        k = apply_rope(self.k_proj(x).view(t, self.num_kv_heads, self.head_dim), cos, sin)
        v = self.v_proj(x).view(t, self.num_kv_heads, self.head_dim)
        return self.o_proj(attend(layer, q, k, v).reshape(t, -1))


class Mlp(nn.Module):
    def __init__(self, s: DecoderShape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, s: DecoderShape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden_size, s.norm_eps)
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.norm_eps)
        self.mlp = Mlp(s)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, layer: int, attend: AttentionBackend) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, layer, attend)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaDecoder(nn.Module):
    """The decoder over a flat stream of tokens (any number of sequences, one backend call per layer)."""

    inv_freq: Tensor  # a registered buffer, which nn.Module's attribute lookup alone types as Tensor | Module

    def __init__(self, shape: DecoderShape) -> None:
        super().__init__()
        self.shape = shape
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(shape) for _ in range(shape.num_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.norm_eps)
        self.lm_head = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)
        if shape.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.register_buffer(
            "inv_freq", rope_inv_freq(shape.head_dim, shape.rope_theta, shape.rope_scaling), persistent=False
        )

    def hidden_states(self, token_ids: Tensor, positions: Tensor, attend: AttentionBackend) -> Tensor:
        """token_ids and positions [T] -> final normed hidden states [T, hidden]."""
        freqs = positions.float()[:, None] * self.inv_freq[None]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = self.embed_tokens(token_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, i, attend)
        return self.norm(x)

    def logits(self, hidden: Tensor) -> Tensor:
        """Hidden states [N, hidden] -> float32 logits [N, vocab]."""
        return self.lm_head(hidden).float()


def init_random_weights(model: LlamaDecoder, seed: int) -> None:
    """Seeded weights whose logits have unit scale, so greedy choices are clear, not near-ties:
    embeddings N(0, 1), every projection N(0, 1/fan_in), norms 1."""
    first = next(model.parameters())
    gen = torch.Generator(device=first.device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                p.fill_(1.0)
            elif name == "embed_tokens.weight":
                p.normal_(0.0, 1.0, generator=gen)
            else:
                p.normal_(0.0, p.shape[1] ** -0.5, generator=gen)


def build_decoder(shape: DecoderShape, dtype: torch.dtype, device: torch.device) -> LlamaDecoder:
    """An uninitialised decoder on `device` (no throwaway default init of large weights)."""
    with torch.device("meta"):
        model = LlamaDecoder(shape)
    model = model.to_empty(device=device).to(dtype)
    if shape.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    model.inv_freq = rope_inv_freq(shape.head_dim, shape.rope_theta, shape.rope_scaling).to(device)
    return model.eval().requires_grad_(False)
