"""The OpenAI request bodies the server accepts, as pydantic models (they are also the OpenAPI
schema that the fuzz tests generate requests from).

Only what the engine uses is validated strictly (`model`, `messages`/`prompt`, `max_tokens`,
`max_completion_tokens`, `stream`, `stream_options`, `n`, vLLM's `cache_salt`); sampling
parameters are accepted with their OpenAI types and ignored, because the sim executor's tokens
are deterministic. Token ids must be ids the engine's tokenizer can give (`max_token_id`), as
vLLM checks them against its vocabulary.
Unknown fields are ignored, as OpenAI-compatible servers do, so a newer client still works.
Types are strict (`"5"` is not a number): a wrong type is a 400 that names the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from record.errors import InvalidRequestError
from reference_engine.tokenizer import Tokenizer, apply_chat_template

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing.TypeIs is 3.13+; only mypy reads it here

_STRICT = ConfigDict(extra="ignore", strict=True)

TokenId = Annotated[int, Field(ge=0)]


class TextPart(BaseModel):
    model_config = _STRICT
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return " ".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool = False


class _CompletionParams(BaseModel):
    model_config = _STRICT
    model: str
    max_tokens: int | None = Field(None, ge=1, description="output tokens at most (prompt + this must fit the context)")
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="only one choice per request is supported")
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    user: str | None = None
    cache_salt: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="prefix-cache salt: requests share cached prefixes only with "
        "requests of the same tenant and the same salt",
    )

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class ChatCompletionRequest(_CompletionParams):
    messages: list[ChatMessage] = Field(min_length=1, description="at least one message")
    max_completion_tokens: int | None = Field(None, ge=1, description="replaces max_tokens when both are set")

    def max_new_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def prompt_text(self) -> str:
        """The prompt as the chat template renders it (`developer` is the system role)."""
        messages = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()} for m in self.messages]
        return apply_chat_template(messages)

    def prompt_token_ids(self, tokenizer: Tokenizer) -> list[int]:
        return tokenizer.encode(self.prompt_text())


class CompletionRequest(_CompletionParams):
    prompt: str | list[str] | list[TokenId] = Field(description="one prompt: text, [text] or token ids")

    def max_new_tokens(self) -> int | None:
        return self.max_tokens

    def prompt_text(self) -> str | None:
        """The prompt's text, or None when it was sent as token ids."""
        p = self.prompt
        return None if _is_token_ids(p) else _one_text(p)

    def prompt_token_ids(self, tokenizer: Tokenizer) -> list[int]:
        p = self.prompt
        if not _is_token_ids(p):
            return tokenizer.encode(_one_text(p))
        too_large = max(p, default=0)
        if too_large > tokenizer.max_token_id:
            raise InvalidRequestError(
                f"token id {too_large} is out of the vocabulary: ids run from 0 to {tokenizer.max_token_id}",
                param="prompt",
            )
        return list(p)


def _is_token_ids(prompt: str | list[str] | list[int]) -> TypeIs[list[int]]:
    """Whether a completion prompt was sent as token ids (an empty list is an empty prompt of ids)."""
    return not isinstance(prompt, str) and not (prompt and isinstance(prompt[0], str))


def _one_text(prompt: str | list[str]) -> str:
    """The text of a prompt sent as text; a list of several texts (a batch) is refused."""
    if isinstance(prompt, str):
        return prompt
    if len(prompt) != 1:
        raise InvalidRequestError(
            f"'prompt' holds {len(prompt)} prompts; batched prompts are not supported, send one prompt per request",
            param="prompt",
        )
    return prompt[0]
