"""Loading a local Hugging Face Llama-style checkpoint directory, never over the network.

A directory holds `config.json`, one or more `*.safetensors` files and optionally
`tokenizer.json`. The checkpoint must have the shape of the catalog model the config names
(`model.name`): the memory plan is computed from the catalog, so a mismatch would make the pool
accounting dishonest — it is an error that lists every differing field. Rope and norm settings
come from the checkpoint's own config.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from record.errors import ConfigError
from reference_engine.catalog import ModelSpec
from reference_engine.executors.torch_model import DecoderShape, LlamaDecoder, build_decoder

SUPPORTED_MODEL_TYPES = ("llama", "mistral")


def read_shape(directory: str | Path) -> DecoderShape:
    """The decoder shape a checkpoint's config.json describes."""
    path = Path(directory) / "config.json"
    try:
        cfg: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"torch.checkpoint: {path} not found; point it at a local Hugging Face model directory"
        ) from None
    kind = cfg.get("model_type")
    if kind not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"{path}: model_type {kind!r} is not a Llama-style decoder the torch executor can run "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    heads = cfg["num_attention_heads"]
    return DecoderShape(
        num_layers=cfg["num_hidden_layers"],
        hidden_size=cfg["hidden_size"],
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads", heads),
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        intermediate_size=cfg["intermediate_size"],
        vocab_size=cfg["vocab_size"],
        rope_theta=cfg.get("rope_theta", 10_000.0),
        norm_eps=cfg.get("rms_norm_eps", 1e-5),
        tie_word_embeddings=cfg.get("tie_word_embeddings", False),
        rope_scaling=cfg.get("rope_scaling"),
    )


def check_matches(shape: DecoderShape, spec: ModelSpec, directory: str | Path) -> None:
    pairs = {
        "num_layers": (shape.num_layers, spec.num_layers),
        "hidden_size": (shape.hidden_size, spec.hidden_size),
        "num_heads": (shape.num_heads, spec.num_attention_heads),
        "num_kv_heads": (shape.num_kv_heads, spec.num_kv_heads),
        "head_dim": (shape.head_dim, spec.head_dim),
        "vocab_size": (shape.vocab_size, spec.vocab_size),
    }
    if spec.intermediate_size is not None:
        pairs["intermediate_size"] = (shape.intermediate_size, spec.intermediate_size)
    wrong = [f"{k}: checkpoint {a}, catalog {b}" for k, (a, b) in pairs.items() if a != b]
    if wrong:
        raise ConfigError(
            f"torch.checkpoint {directory} does not have the shape of model.name = {spec.name!r} "
            f"({'; '.join(wrong)}); name the matching catalog model"
        )


def load_checkpoint(directory: str | Path, spec: ModelSpec, dtype: torch.dtype, device: torch.device) -> LlamaDecoder:
    from safetensors.torch import load_file

    directory = Path(directory)
    shape = read_shape(directory)
    check_matches(shape, spec, directory)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"torch.checkpoint: no *.safetensors file in {directory}")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        for key, tensor in load_file(str(f), device=str(device)).items():
            state[key.removeprefix("model.")] = tensor.to(dtype)
    if shape.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    model = build_decoder(shape, dtype, device)
    missing, unexpected = model.load_state_dict(state, strict=False)
    unexpected = [k for k in unexpected if not k.endswith("rotary_emb.inv_freq")]
    missing = [k for k in missing if not (shape.tie_word_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise ConfigError(
            f"torch.checkpoint {directory}: weights do not match a Llama decoder "
            f"(missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    return model


class HfTokenizer:
    """A checkpoint's `tokenizer.json` behind the engine's `Tokenizer` protocol (encode/decode)."""

    def __init__(self, directory: str | Path) -> None:
        from tokenizers import Tokenizer

        path = Path(directory) / "tokenizer.json"
        if not path.exists():
            raise ConfigError(f"{path} not found: the checkpoint has no tokenizer.json")
        self._tok = Tokenizer.from_file(str(path))
        self.name = f"hf:{Path(directory).name}"
        self.max_token_id = self._tok.get_vocab_size() - 1
        self._max_token_chars = max(map(len, self._tok.get_vocab()), default=1) or 1

    def min_tokens(self, text: str) -> int:
        """No token covers more characters than the longest vocabulary entry has (for a
        normalizer that never shortens text, which a byte-level BPE's does not)."""
        return -(-len(text) // self._max_token_chars)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, token_ids: list[int]) -> str:
        return self._tok.decode(list(token_ids))
