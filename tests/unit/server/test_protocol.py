"""Request bodies: strict types, one choice, text parts, and how prompts become tokens."""

import pytest
from pydantic import ValidationError

from record.errors import InvalidRequestError
from reference_engine.server.protocol import ChatCompletionRequest, CompletionRequest
from reference_engine.tokenizer import WordTokenizer, apply_chat_template

TOK = WordTokenizer()


def test_chat_prompt_is_the_chat_template_and_developer_is_system():
    req = ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            ],
        }
    )
    expected = apply_chat_template([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert req.prompt_token_ids(TOK) == TOK.encode(expected)


def test_max_completion_tokens_wins_over_max_tokens():
    req = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 9, "max_completion_tokens": 3}
    )
    assert req.max_new_tokens() == 3


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": []},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "5"},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2},
        {"model": "m", "messages": [{"role": "wizard", "content": "x"}]},
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}]},
        {"model": 7, "messages": [{"role": "user", "content": "x"}]},
    ],
)
def test_malformed_chat_bodies_are_refused(body):
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate(body)


def test_sampling_parameters_are_accepted_and_unknown_fields_ignored():
    req = ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "temperature": 0,
            "top_p": 0.5,
            "logprobs": True,
            "seed": 1,
        }
    )
    assert req.n == 1


@pytest.mark.parametrize("prompt, expected", [("a b c", 3), (["a b"], 2), ([5, 6, 7, 8], 4)])
def test_completion_prompts_as_text_or_token_ids(prompt, expected):
    req = CompletionRequest.model_validate({"model": "m", "prompt": prompt})
    assert len(req.prompt_token_ids(TOK)) == expected


def test_batched_completion_prompts_are_refused_with_the_fix():
    req = CompletionRequest.model_validate({"model": "m", "prompt": ["a", "b"]})
    with pytest.raises(InvalidRequestError, match="one prompt per request"):
        req.prompt_token_ids(TOK)
