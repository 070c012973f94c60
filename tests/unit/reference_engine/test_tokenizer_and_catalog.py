import dataclasses

import pytest

from record.errors import ConfigError, UnknownNameError
from reference_engine.catalog import DType, get_gpu, get_model
from reference_engine.config import parse_config
from reference_engine.memory import MemoryPlan
from reference_engine.tokenizer import WordTokenizer, apply_chat_template, chat_prompt_tokens, vocab_word


@pytest.mark.parametrize(
    "model,kib",
    [("llama-3-8b", 128), ("qwen2.5-7b", 56), ("llama-3-70b", 320), ("llama-2-7b", 512), ("llama-3.1-70b", 320)],
)
def test_kv_bytes_per_token_are_derived_from_the_architecture(model, kib):
    assert get_model(model).kv_bytes_per_token(DType.BF16) == kib * 1024


def test_fp8_kv_halves_the_bytes():
    assert get_model("llama-3-8b").kv_bytes_per_token(DType.FP8) == 64 * 1024


def test_long_context_models_are_distinct_from_their_8k_siblings():
    assert get_model("llama-3-8b").max_context_tokens == 8192
    assert get_model("llama-3.1-8b").max_context_tokens == 131_072


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(UnknownNameError, match="h100-sxm"):
        get_gpu("h300")


def test_70b_does_not_fit_one_80g_gpu():
    with pytest.raises(ConfigError, match="leaves no KV pool"):
        MemoryPlan.from_config(parse_config({"model": {"name": "llama-3-70b"}}))


def test_word_count_is_token_count():
    tok = WordTokenizer()
    assert len(tok.encode("one two  three\nfour")) == 4


def test_generated_words_tokenise_back_to_their_ids():
    tok = WordTokenizer()
    ids = [5, 100, 4095, 77]
    assert tok.encode(tok.decode(ids)) == ids
    assert len({vocab_word(i) for i in range(4096)}) == 4096


def test_chat_prompt_token_formula():
    tok = WordTokenizer()
    msgs = [{"role": "system", "content": "a b c"}, {"role": "user", "content": "d e"}]
    assert len(tok.encode(apply_chat_template(msgs))) == chat_prompt_tokens([3, 2]) == 10


def test_the_model_digest_covers_every_shape_field_but_the_source():
    spec = get_model("llama-3.1-8b")
    digest = spec.digest(DType.BF16, DType.BF16)
    assert dataclasses.replace(spec, source="elsewhere").digest(DType.BF16, DType.BF16) == digest
    for change in ({"intermediate_size": 1}, {"vocab_size": 1}, {"sliding_window_tokens": 4096}, {"num_layers": 1}):
        assert dataclasses.replace(spec, **change).digest(DType.BF16, DType.BF16) != digest, change
    assert spec.digest(DType.BF16, DType.FP8) != digest


def test_min_tokens_counts_exactly_what_encode_gives_without_building_the_ids():
    tok = WordTokenizer()
    texts = [
        "",
        " ",
        "a",
        " a ",
        "a  b\tc\nd",
        "\x1c x\x1f y",
        "é x",
        "\xa0",
        "a\xa0b c",
        "  x  y  ",
        " ".join(f"w{i}" for i in range(3000)),
    ]
    assert [tok.min_tokens(t) for t in texts] == [len(tok.encode(t)) for t in texts]
