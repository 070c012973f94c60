"""Prompt text for a trace request, so that what a trace says is shared really is shared.

A Mooncake trace names each request's prompt in blocks of `block_tokens` (512) by ids, equal
ids meaning an equal prompt up to there; Azure and BurstGPT give only a length. Sent live, a
request needs real text, and two requests must share exactly the prefix the trace says they
share, so a server's prefix cache meets the trace's reuse:

    block j's words = words(block_tokens, seed_j),  seed_j = H(seed_{j-1}, id_j),  seed_{-1} = ""

`seed_j` chains the ids, so block j's text names the whole prefix up to it: the same id chain
gives the same text, a different id anywhere before gives different text from there on. The
prompt is one user message whose words are the blocks' in order, cut to the request's length
(the last block is usually partial; the chat template's own tokens come off the end), then
words seeded by the request's row where the ids run out (Azure, BurstGPT: all of it, so no two
requests share anything). On the reference engine a word is a token, so block j is exactly
tokens [512 j, 512 (j + 1)) of the content; a BPE server counts more tokens per word, and the
shared part is shared all the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

from harness.loadgen.prompts import Prompt, count_tokens, words

MIN_PROMPT_TOKENS = count_tokens([{"role": "user", "content": "x"}])
"""The shortest prompt a chat message can be: the template and one word."""


def chain_seeds(prefix_ids: Sequence[int]) -> list[str]:
    """seed_j for every block: a digest of the ids up to and including block j."""
    seeds, seed = [], ""
    for block_id in prefix_ids:
        seed = hashlib.blake2b(f"{seed}:{block_id}".encode(), digest_size=16).hexdigest()
        seeds.append(seed)
    return seeds


@lru_cache(maxsize=4096)
def _block_words(seed: str, block_tokens: int) -> tuple[str, ...]:
    return tuple(words(block_tokens, f"trace-block:{seed}").split())


def trace_prompt(
    prefix_ids: Sequence[int], num_prompt_tokens: int, *, block_tokens: int | None, filler_seed: str
) -> Prompt:
    """A one-message prompt of `num_prompt_tokens` tokens (at least `MIN_PROMPT_TOKENS`) on the
    reference engine, its content built from the prefix ids' blocks (module docstring)."""
    num_tokens = max(num_prompt_tokens, MIN_PROMPT_TOKENS)
    num_words = num_tokens - (MIN_PROMPT_TOKENS - 1)
    content: list[str] = []
    if block_tokens:
        for seed in chain_seeds(prefix_ids):
            if len(content) >= num_words:
                break
            content.extend(_block_words(seed, block_tokens)[: num_words - len(content)])
    if len(content) < num_words:
        content.extend(words(num_words - len(content), f"trace-filler:{filler_seed}").split())
    return Prompt([{"role": "user", "content": " ".join(content)}], num_tokens)
