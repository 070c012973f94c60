"""Counting prompt tokens on the target, so prompt sizes mean the target's tokens.

    counter = target_counter(base_url, key=key, model=model)   # None: the server cannot count
    counter = FileCounter(Path("tokenizer.json"))              # a `tokenizers` file (--tokenizer)
    tokens = fit_token_model(counter)                          # a TokenModel for the scenarios

The scenarios write prompts of seeded words (harness/loadgen/prompts.py). A BPE tokenizer
splits those words into a different number of tokens than the reference engine's one per word,
so before the load the harness asks the target what a few such prompts cost and fits
the model of harness/loadgen/prompts.py `TokenModel` to them (four probes: `fit_token_model`). The words come from
a small vocabulary, so their mean cost per word holds for prompts of any length: a 32K-token
prompt is 32K tokens on the target, to within a percent.

Who counts, best first:
    the server's own `/tokenize`   vLLM and SGLang take the chat messages and apply the model's
                                   chat template (`count`); llama.cpp's server takes text, so
                                   the messages go through its `/apply-template` first
    a tokenizer file               `--tokenizer tokenizer.json` (the `tokenizers` package): the
                                   messages' text only, no chat template (a few tokens per
                                   message short)
Without either, a run against another server keeps the reference engine's words, and its
record says so (`meta.live.tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

from harness.loadgen.prompts import Message, TokenModel, balanced_words
from record.errors import KvgateError

TOKENIZE_PATH = "/tokenize"
APPLY_TEMPLATE_PATH = "/apply-template"
PROBE_REPEATS = 100
"""Times each seeded word appears in the probe that measures the cost per word (6,000 words)."""


class TokenCountError(KvgateError):
    """The target or the tokenizer file could not count a prompt."""


class TokenCounter(Protocol):
    source: str  # what counted, for the record: "/tokenize", "tokenizer.json", ...

    def count(self, messages: Sequence[Message]) -> int: ...


@dataclass(frozen=True)
class MeasuredTokens:
    model: TokenModel
    source: str


def fit_token_model(counter: TokenCounter, other_text: str) -> MeasuredTokens:
    """Four probes -> the model: one empty message (the template's cost of one message and of
    the prompt), two empty messages (one message's more), one long message with every seeded
    word equally often (their mean cost per word, exact), and `other_text` (the system prompt
    the scenarios send: the cost of its words). Empty probes carry no word noise, so the fixed
    costs are exact."""
    one_empty = counter.count([{"role": "user", "content": ""}])
    two_empty = counter.count([{"role": "system", "content": ""}, {"role": "user", "content": ""}])
    probe = balanced_words(PROBE_REPEATS)
    num_probe = len(probe.split())
    one_long = counter.count([{"role": "user", "content": probe}])
    per_word = (one_long - one_empty) / num_probe
    if per_word <= 0:
        raise TokenCountError(
            f"{counter.source} counted {one_long} tokens for {num_probe} words and {one_empty} "
            f"for none: not a tokenizer a prompt can be sized with"
        )
    per_message = two_empty - one_empty
    num_other = len(other_text.split())
    other = counter.count([{"role": "user", "content": other_text}]) if num_other else one_empty
    per_other_word = (other - one_empty) / num_other if num_other and other > one_empty else per_word
    return MeasuredTokens(TokenModel(per_word, per_message, one_empty - per_message, per_other_word), counter.source)


class TargetCounter:
    """The server's own `/tokenize` (vLLM, SGLang: chat messages; llama.cpp: templated text)."""

    def __init__(self, client: httpx.Client, base_url: str, *, key: str, model: str, templated: bool) -> None:
        self._client, self._base, self._model, self._templated = client, base_url.rstrip("/"), model, templated
        self._headers = {"Authorization": f"Bearer {key}"}
        self.source = f"{TOKENIZE_PATH} of the target" + (f" after {APPLY_TEMPLATE_PATH}" if templated else "")

    def count(self, messages: Sequence[Message]) -> int:
        if not self._templated:
            return int(self._post(TOKENIZE_PATH, {"model": self._model, "messages": list(messages)})["count"])
        prompt = self._post(APPLY_TEMPLATE_PATH, {"messages": list(messages)})["prompt"]
        return len(self._post(TOKENIZE_PATH, {"content": prompt, "add_special": True})["tokens"])

    def _post(self, path: str, body: dict) -> dict:
        try:
            resp = self._client.post(self._base + path, json=body, headers=self._headers)
            resp.raise_for_status()
            return resp.json()
        except (httpx.HTTPError, ValueError) as err:
            raise TokenCountError(f"POST {self._base}{path} failed: {err}") from err


def target_counter(client: httpx.Client, base_url: str, *, key: str, model: str) -> TargetCounter | None:
    """The target's counter when it has one: a chat-message `/tokenize` (answers with `count`),
    else llama.cpp's text `/tokenize` behind `/apply-template`; None when it has neither."""
    probe = [{"role": "user", "content": "hello"}]
    for templated in (False, True):
        counter = TargetCounter(client, base_url, key=key, model=model, templated=templated)
        try:
            counter.count(probe)
        except (TokenCountError, KeyError, TypeError):
            continue
        return counter
    return None


class FileCounter:
    """A `tokenizers` tokenizer file: the messages' text, without a chat template."""

    def __init__(self, path: Path) -> None:
        try:
            import tokenizers
        except ImportError as err:
            raise TokenCountError("--tokenizer needs the `tokenizers` package: pip install 'tokenizers>=0.15'") from err
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as err:  # the package raises its own untyped errors for a bad file
            raise TokenCountError(f"cannot read the tokenizer file {path}: {err}") from err
        self.source = f"tokenizer file {path.name}"

    def count(self, messages: Sequence[Message]) -> int:
        return sum(len(self._tokenizer.encode(m["content"]).ids) for m in messages)


def measure_tokens(
    base_url: str,
    *,
    key: str,
    model: str,
    system_prompt: str,
    tokenizer: Path | None = None,
    timeout_s: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> MeasuredTokens | None:
    """The target's token model: from its `/tokenize`, else from `tokenizer`; None when neither
    can count (the scenarios keep the reference engine's words). `transport`: a test seam."""
    with httpx.Client(timeout=timeout_s, transport=transport) as client:
        counter: TokenCounter | None = target_counter(client, base_url, key=key, model=model)
        if counter is None and tokenizer is not None:
            counter = FileCounter(tokenizer)
        return fit_token_model(counter, system_prompt) if counter is not None else None
