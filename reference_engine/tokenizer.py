"""A deterministic word tokenizer and the chat template, so clients can count tokens exactly.

Rules (stable across processes and versions of this module's `name`):
- A text's tokens are its whitespace-separated words: `len(text.split())` tokens, always.
- A word in the vocabulary (`vocab_word(i)`, the words the engine generates) maps to its index;
  any other word maps to `VOCAB_SIZE + crc32(word)`. So generated text tokenises back to the
  exact ids that produced it, which is what lets a multi-turn session hit its own prefix.
- The chat template wraps every message as `<|role|> content... <|end|>` and ends the prompt
  with `<|assistant|>`: a chat prompt has  Σ(words(content) + 2) + 1  tokens.

It is a stand-in with the properties the engine needs (exact counts, fast, invertible on its own
output); a real tokenizer (`tokenizers`) can replace it behind the same two methods.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

VOCAB_SIZE = 4096
# bytes -> 0 for the ASCII characters str.split() separates on, 1 for every other byte
_WORD_BYTES = bytes(0 if chr(b).isspace() else 1 for b in range(128)) + bytes([1]) * 128
_SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "ve", "zu", "an", "el", "in", "or", "ul", "ys")
SPECIAL_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>")
ROLES = ("system", "user", "assistant", "tool")


def vocab_word(index: int) -> str:
    """The word for vocabulary id `index`: three syllables, unique for every id below VOCAB_SIZE."""
    s = _SYLLABLES
    return s[index % 16] + s[(index // 16) % 16] + s[(index // 256) % 16]


class Tokenizer(Protocol):
    name: str
    max_token_id: int  # the largest id `encode` can give: a client's token ids must not pass it

    def encode(self, text: str) -> list[int]: ...

    def decode(self, token_ids: Sequence[int]) -> str: ...

    def min_tokens(self, text: str) -> int:
        """A lower bound on `len(encode(text))` at a small fraction of its cost: what admission
        may refuse a long prompt on before it is tokenized."""
        ...


class WordTokenizer:
    """Whitespace words -> ids; see the module docstring for the exact rules."""

    name = "kvgate-words-v1"
    max_token_id = VOCAB_SIZE + 0xFFFFFFFF  # an out-of-vocabulary word's id is VOCAB_SIZE + crc32

    def __init__(self) -> None:
        specials = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
        self._words = [vocab_word(i) for i in range(VOCAB_SIZE)]
        # Specials take the first ids; vocabulary words keep their own index otherwise.
        self._ids: dict[str, int] = {w: i for i, w in enumerate(self._words)}
        for tok, i in specials.items():
            self._words[i] = tok
            self._ids[tok] = i
        self.special_ids = specials

    def encode(self, text: str) -> list[int]:
        ids = self._ids
        return [ids[w] if w in ids else VOCAB_SIZE + zlib.crc32(w.encode()) for w in text.split()]

    def min_tokens(self, text: str) -> int:
        """Exactly `len(encode(text))`: the words of an ASCII text counted at C speed as the
        starts of runs of word bytes (no word list built), `len(text.split())` otherwise."""
        if not text.isascii():
            return len(text.split())
        marks = text.encode().translate(_WORD_BYTES)
        return marks.count(b"\0\1") + (marks[:1] == b"\1")

    def decode(self, token_ids: Sequence[int]) -> str:
        words = self._words
        return " ".join(words[t] if t < VOCAB_SIZE else f"<{t}>" for t in token_ids)

    def first_generatable_id(self) -> int:
        return len(SPECIAL_TOKENS)


def apply_chat_template(messages: Iterable[Mapping[str, str]]) -> str:
    """Render chat messages as one prompt text (the kvgate-chat-v1 template)."""
    parts: list[str] = []
    for m in messages:
        parts.append(f"<|{m['role']}|> {m['content']} <|end|>")
    parts.append("<|assistant|>")
    return " ".join(parts)


def chat_prompt_tokens(contents_words: Iterable[int]) -> int:
    """Token count of a chat prompt whose messages have these word counts."""
    counts = list(contents_words)
    return sum(n + 2 for n in counts) + 1
