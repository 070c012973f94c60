"""Chat prompts of a given size in the target's tokens.

A `TokenModel` says what a chat prompt costs on the target: `per_word · seeded words +
per_other_word · other words + per_message · messages + base`. On the reference engine (one
token per whitespace word, reference_engine/tokenizer.py) it is exact — Σ (w_i + 2) + 1 under
the kvgate chat template — so `chat_prompt(64, ...)` is 64 prompt tokens there. For any other
server the harness measures the model before the load (harness/token_counts.py: the server's
`/tokenize`, or a tokenizer file) and hands it to the scenarios as the `token_model` setting,
so a 32K-token prompt is 32K tokens on the target's own tokenizer (to within a percent: the
words are drawn uniformly from a small vocabulary, so their mean cost per word holds over long
prompts; a short prompt is off by the few tokens its own words happen to cost more or less).

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

_REFERENCE_ONE_MESSAGE = chat_prompt_tokens([0])
_REFERENCE_TWO_MESSAGES = chat_prompt_tokens([0, 0])

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant . Answer briefly and precisely , cite sources when you can , "
    "and say so when you do not know ."
)
"""The public pinned prefix of configs/default.toml, word for word."""

_WORDS = (
    "alpha",
    "bright",
    "cache",
    "delta",
    "engine",
    "forest",
    "garden",
    "harbor",
    "island",
    "jacket",
    "kernel",
    "ladder",
    "memory",
    "number",
    "orange",
    "pencil",
    "quartz",
    "river",
    "signal",
    "token",
    "umbrella",
    "valley",
    "window",
    "yellow",
    "zebra",
    "anchor",
    "basket",
    "candle",
    "dragon",
    "empire",
    "falcon",
    "galaxy",
    "hammer",
    "insect",
    "jungle",
    "kettle",
    "lemon",
    "magnet",
    "needle",
    "oyster",
    "planet",
    "quiver",
    "rocket",
    "saddle",
    "tunnel",
    "unicorn",
    "velvet",
    "walnut",
    "yogurt",
    "zipper",
    "why",
    "how",
    "what",
    "when",
    "explain",
    "describe",
    "compare",
    "summarise",
    "list",
    "tell",
)

_SEEDED = frozenset(_WORDS)

Message = dict[str, str]


@dataclass(frozen=True, slots=True)
class TokenModel:
    """Prompt tokens of chat messages on one target, fitted to its tokenizer: the seeded words
    (`_WORDS`) cost `per_word` each, any other word (a system prompt's prose) `per_other_word`,
    each message `per_message`, the prompt `base`."""

    per_word: float
    per_message: float
    base: float
    per_other_word: float

    def __post_init__(self) -> None:
        if not (self.per_word > 0 and self.per_other_word > 0):
            raise ValueError(f"a token model needs positive costs per word, got {self.per_word}, {self.per_other_word}")

    def count(self, messages: Sequence[Message]) -> int:
        tokens = self.per_message * len(messages) + self.base
        for message in messages:
            seeded = sum(1 for word in message["content"].split() if word in _SEEDED)
            tokens += self.per_word * seeded + self.per_other_word * (len(message["content"].split()) - seeded)
        return round(tokens)

    def words_for(self, num_tokens: float) -> int:
        """Words whose cost is closest to `num_tokens` (what they add to a prompt)."""
        return round(num_tokens / self.per_word)

    def spec(self) -> str:
        """`per_word,per_message,base,per_other_word`: the `token_model` setting's form."""
        return f"{self.per_word:.6g},{self.per_message:.6g},{self.base:.6g},{self.per_other_word:.6g}"

    @classmethod
    def parse(cls, spec: str) -> TokenModel:
        """A `spec()` string; '' is the reference engine's words."""
        if not spec:
            return REFERENCE_TOKENS
        try:
            per_word, per_message, base, per_other_word = (float(part) for part in spec.split(","))
        except ValueError:
            raise ValueError(
                f"token model {spec!r} is not per_word,per_message,base,per_other_word (four numbers)"
            ) from None
        return cls(per_word, per_message, base, per_other_word)


REFERENCE_TOKENS = TokenModel(
    per_word=1.0,
    per_message=_REFERENCE_TWO_MESSAGES - _REFERENCE_ONE_MESSAGE,
    base=2 * _REFERENCE_ONE_MESSAGE - _REFERENCE_TWO_MESSAGES,
    per_other_word=1.0,
)
"""The reference engine's word tokenizer and chat template, exact."""


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: list[Message]
    num_tokens: int
    """Prompt tokens on the target's tokenizer, as its `TokenModel` counts them."""


class PromptTooShortError(ValueError):
    """The fixed parts (system text, prefix, template) already exceed the wanted size."""


def words(num_words: int, seed: int | str) -> str:
    """`num_words` whitespace-separated words, the same for the same seed."""
    if num_words <= 0:
        return ""
    return " ".join(random.Random(seed).choices(_WORDS, k=num_words))


def balanced_words(repeats: int) -> str:
    """Every seeded word `repeats` times, in a seeded order: text whose cost per word is the mean
    over the vocabulary that `words` draws from uniformly, with no sampling noise."""
    pool = list(_WORDS) * repeats
    random.Random("balanced").shuffle(pool)
    return " ".join(pool)


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


def count_tokens(messages: Sequence[Message], tokens: TokenModel = REFERENCE_TOKENS) -> int:
    return tokens.count(messages)


def chat_prompt(
    num_tokens: int, *, seed: int | str, system: str = "", prefix: str = "", tokens: TokenModel = REFERENCE_TOKENS
) -> Prompt:
    """A system message (if `system`) and one user message (`prefix` + seeded question words)
    of `num_tokens` tokens as `tokens` counts them (exactly, on the reference engine)."""
    fixed = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prefix}]
    num_question = tokens.words_for(num_tokens - tokens.count(fixed))
    if num_question < 1:
        raise PromptTooShortError(
            f"a {num_tokens}-token prompt cannot hold its fixed parts "
            f"({tokens.count(fixed)} tokens of system text, prefix and template) plus a question"
        )
    question = words(num_question, seed)
    fixed[-1] = {"role": "user", "content": f"{prefix} {question}" if prefix else question}
    return Prompt(fixed, num_tokens)


def next_turn(
    history: Sequence[Message], num_words: int, seed: int | str, tokens: TokenModel = REFERENCE_TOKENS
) -> Prompt:
    """The history plus a new user message of `num_words` words (a multi-turn session)."""
    messages = [*history, {"role": "user", "content": words(num_words, seed)}]
    return Prompt(messages, tokens.count(messages))
