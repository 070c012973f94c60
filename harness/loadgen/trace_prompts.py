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
requests share anything). Sizes are in the target's tokens (`TokenModel`, fitted to its
tokenizer before the load): a block is the number of words that cost `block_tokens` there. On
the reference engine a word is a token, so block j is exactly tokens [512 j, 512 (j + 1)) of
the content; on a BPE server a block is fewer words of the same cost, shared all the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

from harness.loadgen.prompts import REFERENCE_TOKENS, Message, Prompt, TokenModel, words


def chain_seeds(prefix_ids: Sequence[int]) -> list[str]:
    """seed_j for every block: a digest of the ids up to and including block j."""
    seeds, seed = [], ""
    for block_id in prefix_ids:
        seed = hashlib.blake2b(f"{seed}:{block_id}".encode(), digest_size=16).hexdigest()
        seeds.append(seed)
    return seeds


@lru_cache(maxsize=4096)
def _block_words(seed: str, num_words: int) -> tuple[str, ...]:
    return tuple(words(num_words, f"trace-block:{seed}").split())


def trace_prompt(
    prefix_ids: Sequence[int],
    num_prompt_tokens: int,
    *,
    block_tokens: int | None,
    filler_seed: str,
    tokens: TokenModel = REFERENCE_TOKENS,
) -> Prompt:
    """A one-message prompt of `num_prompt_tokens` tokens as `tokens` counts them (at least the
    template and one word), its content built from the prefix ids' blocks (module docstring)."""
    template = tokens.count([{"role": "user", "content": ""}])
    num_words = max(1, tokens.words_for(num_prompt_tokens - template))
    content: list[str] = []
    if block_tokens:
        block_words = max(1, tokens.words_for(block_tokens))
        for seed in chain_seeds(prefix_ids):
            if len(content) >= num_words:
                break
            content.extend(_block_words(seed, block_words)[: num_words - len(content)])
    if len(content) < num_words:
        content.extend(words(num_words - len(content), f"trace-filler:{filler_seed}").split())
    messages: list[Message] = [{"role": "user", "content": " ".join(content)}]
    return Prompt(messages, tokens.count(messages))
