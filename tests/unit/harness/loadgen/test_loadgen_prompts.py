from __future__ import annotations

import random

import pytest

from harness.loadgen.prompts import (
    DEFAULT_SYSTEM_PROMPT,
    REFERENCE_TOKENS,
    DocumentShelf,
    PromptTooShortError,
    TokenModel,
    chat_prompt,
    count_tokens,
    next_turn,
    words,
)
from harness.loadgen.settings import LoadSettings, SettingsError
from reference_engine import load_config
from reference_engine.tokenizer import WordTokenizer, apply_chat_template, chat_prompt_tokens

TOKENIZER = WordTokenizer()


def engine_tokens(messages: list[dict[str, str]]) -> list[int]:
    """What the reference engine's chat endpoint tokenizes (server/protocol.py)."""
    return TOKENIZER.encode(apply_chat_template(messages))


@pytest.mark.parametrize("num_tokens", [32, 64, 1000, 32768])
def test_a_chat_prompt_has_exactly_the_asked_number_of_engine_tokens(num_tokens: int) -> None:
    prompt = chat_prompt(num_tokens, seed=1, system=DEFAULT_SYSTEM_PROMPT)
    assert len(engine_tokens(prompt.messages)) == num_tokens == prompt.num_tokens


def test_the_default_system_prompt_is_the_default_configs_public_prefix_word_for_word() -> None:
    prefixes = load_config("configs/default.toml").prefix_cache.public_prefixes
    assert prefixes[0].text == DEFAULT_SYSTEM_PROMPT


def test_requests_share_exactly_the_system_prompt_and_the_tenants_document() -> None:
    document = DocumentShelf("acme", 100, num_documents=1, popularity=1.0).pick(random.Random(0))
    a = engine_tokens(chat_prompt(300, seed="a", system=DEFAULT_SYSTEM_PROMPT, prefix=document).messages)
    b = engine_tokens(chat_prompt(300, seed="b", system=DEFAULT_SYSTEM_PROMPT, prefix=document).messages)
    shared = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    system_tokens = count_tokens([{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}]) - 1  # without <|assistant|>
    assert shared == system_tokens + 1 + 100  # system message, <|user|>, the tenant's document
    assert DocumentShelf("globex", 100, 1, 1.0).pick(random.Random(0)) != document


def test_a_shelf_has_documents_of_differing_length_and_popularity() -> None:
    shelf = DocumentShelf("acme", 400, num_documents=8, popularity=1.0)
    lengths = shelf.lengths()
    assert min(lengths) == 100 and max(lengths) == 800 and lengths == shelf.lengths()  # stable per tenant
    assert lengths != DocumentShelf("globex", 400, 8, 1.0).lengths()  # shuffled per tenant
    rng = random.Random(1)
    picks = [len(shelf.pick(rng).split()) for _ in range(2000)]
    first, second = picks.count(lengths[0]), picks.count(lengths[1])
    assert first > 1.5 * second  # Zipf: the first document twice as popular as the second, about
    flat = DocumentShelf("acme", 400, 8, popularity=0.0)
    assert {len(flat.pick(rng).split()) for _ in range(400)} == set(lengths)


def test_words_are_deterministic_per_seed() -> None:
    assert words(50, "s") == words(50, "s") != words(50, "t")
    assert len(words(50, "s").split()) == 50 and words(0, "s") == ""


def test_a_prompt_too_small_for_its_fixed_parts_is_an_error() -> None:
    with pytest.raises(PromptTooShortError, match="fixed parts"):
        chat_prompt(10, seed=1, system=DEFAULT_SYSTEM_PROMPT)


def test_a_next_turn_keeps_the_history_as_its_prefix() -> None:
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "kaloan mipe"},
    ]
    turn = next_turn(history, 7, seed=3)
    assert turn.messages[:3] == history and len(turn.messages[3]["content"].split()) == 7
    assert len(engine_tokens(turn.messages)) == turn.num_tokens


def test_the_reference_token_model_is_the_engines_chat_template_exactly() -> None:
    messages = [{"role": "system", "content": "a b c"}, {"role": "user", "content": "d e"}]
    assert REFERENCE_TOKENS.count(messages) == chat_prompt_tokens([3, 2])
    assert TokenModel.parse("") is REFERENCE_TOKENS
    assert TokenModel.parse(TokenModel(1.3125, 4.0, 3.0, 1.1).spec()) == TokenModel(1.3125, 4.0, 3.0, 1.1)


def test_a_bad_token_model_setting_names_the_option() -> None:
    with pytest.raises(SettingsError, match="--kvgate-token-model"):
        LoadSettings(token_model="1.3,4,3")
    assert LoadSettings(token_model="1.5,4,3,1").tokens.per_word == 1.5
