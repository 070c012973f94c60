"""Chat prompts with exact token counts, for the engine's tokenizer (one token per whitespace
word, reference_engine/tokenizer.py).

A chat prompt of messages with w_i words costs  Σ (w_i + 2) + 1  tokens under the kvgate chat
template, so a builder can hit a size exactly: `chat_prompt(64, ...)` is 64 prompt tokens on
the reference engine. On another server (a BPE tokenizer) the same prompt is a few times more
tokens, consistently across runs, which is what a comparison needs.

Sharing is deliberate and explicit: a request shares prefix blocks with others only through
its `system` text (the config's public prefix: shared across tenants) and its `prefix` text (a
tenant's own document: shared within the tenant). The question words are seeded per request,
so two requests never share by accident.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from reference_engine.tokenizer import chat_prompt_tokens

DEFAULT_SYSTEM_PROMPT = ("You are a helpful assistant . Answer briefly and precisely , cite sources when you can , "
                         "and say so when you do not know .")
"""The public pinned prefix of configs/default.toml, word for word."""

_WORDS = ("alpha", "bright", "cache", "delta", "engine", "forest", "garden", "harbor", "island", "jacket",
          "kernel", "ladder", "memory", "number", "orange", "pencil", "quartz", "river", "signal", "token",
          "umbrella", "valley", "window", "yellow", "zebra", "anchor", "basket", "candle", "dragon", "empire",
          "falcon", "galaxy", "hammer", "insect", "jungle", "kettle", "lemon", "magnet", "needle", "oyster",
          "planet", "quiver", "rocket", "saddle", "tunnel", "unicorn", "velvet", "walnut", "yogurt", "zipper",
          "why", "how", "what", "when", "explain", "describe", "compare", "summarise", "list", "tell")

Message = dict[str, str]


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: list[Message]
    num_tokens: int
    """Prompt tokens on the reference engine's tokenizer."""


class PromptTooShortError(ValueError):
    """The fixed parts (system text, prefix, template) already exceed the wanted size."""


def words(num_words: int, seed: int | str) -> str:
    """`num_words` whitespace-separated words, the same for the same seed."""
    if num_words <= 0:
        return ""
    return " ".join(random.Random(seed).choices(_WORDS, k=num_words))


@dataclass(frozen=True, slots=True)
class DocumentShelf:
    """A tenant's shared documents: of differing lengths, asked about with Zipf popularity.

    Document i is asked about with weight 1 / (i + 1) ** `popularity`; lengths run from a quarter
    to twice `typical_words`, shuffled per tenant so that popularity and length are independent
    (a popular document may be short or long: what value density weighs against recency)."""

    tenant: str
    typical_words: int
    num_documents: int
    popularity: float

    def lengths(self) -> list[int]:
        n = self.num_documents
        low, high = max(1, self.typical_words // 4), 2 * self.typical_words
        spread = [round(low * (high / low) ** (i / (n - 1))) if n > 1 else self.typical_words for i in range(n)]
        random.Random(f"shelf:{self.tenant}").shuffle(spread)
        return spread

    def pick(self, rng: random.Random) -> str:
        """The text of the document the next question is about."""
        weights = [1 / (i + 1) ** self.popularity for i in range(self.num_documents)]
        i = rng.choices(range(self.num_documents), weights=weights)[0]
        return words(self.lengths()[i], f"document:{self.tenant}:{i}")


def count_tokens(messages: Sequence[Message]) -> int:
    return chat_prompt_tokens(len(m["content"].split()) for m in messages)


def chat_prompt(num_tokens: int, *, seed: int | str, system: str = "", prefix: str = "") -> Prompt:
    """A system message (if `system`) and one user message (`prefix` + seeded question words)
    of exactly `num_tokens` tokens."""
    fixed = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prefix}]
    num_question = num_tokens - count_tokens(fixed)
    if num_question < 1:
        raise PromptTooShortError(f"a {num_tokens}-token prompt cannot hold its fixed parts "
                                  f"({count_tokens(fixed)} tokens of system text, prefix and template) plus a question")
    question = words(num_question, seed)
    fixed[-1] = {"role": "user", "content": f"{prefix} {question}" if prefix else question}
    return Prompt(fixed, num_tokens)


def next_turn(history: Sequence[Message], num_words: int, seed: int | str) -> Prompt:
    """The history plus a new user message of `num_words` words (a multi-turn session)."""
    messages = [*history, {"role": "user", "content": words(num_words, seed)}]
    return Prompt(messages, count_tokens(messages))
