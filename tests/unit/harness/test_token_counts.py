"""Prompt sizes in the target's tokens: the counters, the fitted model, and 32K that is 32K."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from harness.loadgen.prompts import DEFAULT_SYSTEM_PROMPT, chat_prompt
from harness.token_counts import FileCounter, TokenCountError, fit_token_model, measure_tokens

tokenizers = pytest.importorskip("tokenizers")


class Syllables:
    """A counter whose words cost what a BPE gives words: two tokens for long words, one for
    short ones, and a chat template of 4 tokens a message plus 3."""

    source = "syllables"

    def count(self, messages) -> int:
        return sum(sum(2 if len(w) > 5 else 1 for w in m["content"].split()) + 4 for m in messages) + 3


def test_the_fitted_model_sizes_a_32k_prompt_within_a_percent_of_the_counter() -> None:
    counter = Syllables()
    measured = fit_token_model(counter, DEFAULT_SYSTEM_PROMPT)
    assert measured.source == "syllables" and 1 < measured.model.per_word < 2
    for size, within in ((64, 0.15), (4096, 0.01), (32_768, 0.01)):  # a short prompt: a few words' noise
        prompt = chat_prompt(size, seed=f"p-{size}", system=DEFAULT_SYSTEM_PROMPT, tokens=measured.model)
        assert counter.count(prompt.messages) == pytest.approx(size, rel=within)


def bpe_file(tmp_path: Path) -> Path:
    """A small BPE tokenizer trained on the scenarios' words: splits them as a real one would."""
    from harness.loadgen.prompts import words

    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]"])
    tok.train_from_iterator([words(50, i) for i in range(200)], trainer)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def test_a_tokenizer_file_sizes_a_32k_prompt_within_a_percent(tmp_path: Path) -> None:
    counter = FileCounter(bpe_file(tmp_path))
    model = fit_token_model(counter, DEFAULT_SYSTEM_PROMPT).model
    assert model.per_word > 1.2  # the file splits the words: one token per word would be far off
    prompt = chat_prompt(32_768, seed="long", system=DEFAULT_SYSTEM_PROMPT, tokens=model)
    assert counter.count(prompt.messages) == pytest.approx(32_768, rel=0.01)


def test_a_bad_tokenizer_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(TokenCountError, match="cannot read the tokenizer file"):
        FileCounter(tmp_path / "bad.json")


def vllm_like(request: httpx.Request) -> httpx.Response:
    if request.url.path != "/tokenize":
        return httpx.Response(404)
    body = json.loads(request.content)
    return httpx.Response(200, json={"count": Syllables().count(body["messages"]), "max_model_len": 65536})


def llama_cpp_like(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if request.url.path == "/apply-template":
        return httpx.Response(
            200, json={"prompt": "".join(f"<{m['role']}> {m['content']} <end> " for m in body["messages"])}
        )
    if request.url.path == "/tokenize" and "content" in body:
        return httpx.Response(200, json={"tokens": list(range(len(body["content"].split())))})
    return httpx.Response(400, json={"error": "content is required"})


@pytest.mark.parametrize(
    ("handler", "source"),
    [(vllm_like, "/tokenize of the target"), (llama_cpp_like, "/tokenize of the target after /apply-template")],
)
def test_the_targets_own_tokenize_counts_first(handler, source: str, tmp_path: Path) -> None:
    measured = measure_tokens(
        "http://t",
        key="k",
        model="m",
        system_prompt=DEFAULT_SYSTEM_PROMPT,
        tokenizer=tmp_path / "never-read.json",
        transport=httpx.MockTransport(handler),
    )
    assert measured is not None and measured.source == source


def test_without_tokenize_the_file_counts_and_without_either_nothing_does(tmp_path: Path) -> None:
    nothing = httpx.MockTransport(lambda request: httpx.Response(404))
    assert (
        measure_tokens("http://t", key="k", model="m", system_prompt=DEFAULT_SYSTEM_PROMPT, transport=nothing) is None
    )
    measured = measure_tokens(
        "http://t",
        key="k",
        model="m",
        system_prompt=DEFAULT_SYSTEM_PROMPT,
        tokenizer=bpe_file(tmp_path),
        transport=nothing,
    )
    assert measured is not None and measured.source == "tokenizer file tokenizer.json"
