"""Loading a local Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from reference_engine import ConfigError  # noqa: E402
from reference_engine.catalog import get_model  # noqa: E402
from reference_engine.executors.torch_checkpoint import HfTokenizer, load_checkpoint  # noqa: E402
from tests.torch_helpers import make_core, run_to_end, torch_config  # noqa: E402

pytestmark = pytest.mark.torch
TINY_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 4096,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}


def save_checkpoint(directory, model, config=TINY_CONFIG) -> None:
    """Write `model` the way Hugging Face lays out a LlamaForCausalLM, split over two files."""
    state = {("" if k == "lm_head.weight" else "model.") + k: v.contiguous() for k, v in model.state_dict().items()}
    keys = sorted(state)
    half = len(keys) // 2
    safetensors_torch.save_file({k: state[k] for k in keys[:half]}, str(directory / "model-00001-of-00002.safetensors"))
    safetensors_torch.save_file({k: state[k] for k in keys[half:]}, str(directory / "model-00002-of-00002.safetensors"))
    (directory / "config.json").write_text(json.dumps(config))


def generate(config, prompt_ids):
    core = make_core(config)
    r = core.add_request(tenant="acme", prompt_token_ids=prompt_ids, max_new_tokens=12)
    run_to_end(core)
    return core, r.output_token_ids


def test_a_saved_checkpoint_loads_back_and_generates_the_same_tokens(tmp_path):
    ids = list(range(40, 100))
    core, expected = generate(torch_config(64, engine__seed=5), ids)
    save_checkpoint(tmp_path, core.executor.model)
    loaded, tokens = generate(torch_config(64, torch__checkpoint=str(tmp_path)), ids)
    assert tokens == expected
    for (name, a), b in zip(core.executor.model.state_dict().items(), loaded.executor.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_a_checkpoint_of_another_shape_names_every_mismatch(tmp_path):
    core, _ = generate(torch_config(64), [5, 6, 7])
    save_checkpoint(tmp_path, core.executor.model, {**TINY_CONFIG, "num_hidden_layers": 3, "num_key_value_heads": 4})
    with pytest.raises(ConfigError, match="num_layers: checkpoint 3, catalog 2; num_kv_heads: checkpoint 4, catalog 2"):
        load_checkpoint(tmp_path, get_model("kvgate-tiny"), torch.float32, torch.device("cpu"))


def test_a_non_llama_checkpoint_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**TINY_CONFIG, "model_type": "gpt2"}))
    with pytest.raises(ConfigError, match="model_type 'gpt2'"):
        load_checkpoint(tmp_path, get_model("kvgate-tiny"), torch.float32, torch.device("cpu"))


def test_tied_embeddings_load_without_an_lm_head(tmp_path):
    core, _ = generate(torch_config(64), [5, 6, 7])
    state = {"model." + k: v for k, v in core.executor.model.state_dict().items() if k != "lm_head.weight"}
    safetensors_torch.save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({**TINY_CONFIG, "tie_word_embeddings": True}))
    model = load_checkpoint(tmp_path, get_model("kvgate-tiny"), torch.float32, torch.device("cpu"))
    assert model.lm_head.weight.data_ptr() == model.embed_tokens.weight.data_ptr()


def test_tokenizer_json_round_trips_through_the_engine_tokenizer_protocol(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "hello": 1, "kv": 2, "cache": 3}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    hf = HfTokenizer(tmp_path)
    assert hf.encode("hello kv cache") == [1, 2, 3]
    assert hf.decode([1, 2, 3]) == "hello kv cache"
