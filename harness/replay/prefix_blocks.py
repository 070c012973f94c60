"""Trace prefix ids -> the engine's prompt block hashes, so shared prefixes really hit.

A trace names its prompt in blocks of P tokens (Mooncake: P = 512) by ids that are equal exactly
when the prefix up to there is equal. The engine caches blocks of B tokens (default 16) keyed by
chained hashes. Replay gives the engine `prompt_block_hashes` instead of tokens:

    h_j   = hash((h_{j-1}, scope_j, id_j))          one per trace block j   (h_{-1} = 0)
    key_i = (h_j mod 2^(60-S)) · 2^S + (i - first_j)    engine block i, where j is the trace block
                                                      holding its last token and first_j the first
                                                      engine block that ends in trace block j

`h_j` is chained, so `key_i` names the exact prompt up to the end of engine block i; equal keys
mean equal tokens. S bits hold the sub-index (S = 6 for P = 512, B = 16), so two different
prompts share a key only if their chained hashes agree in 54 bits (≈ 2^-16 over the ≈ 10^6 trace
blocks of the Mooncake trace, the same order as the engine's own 64-bit hashes over a run). Keys
stay below 2^60 on purpose: such ints are cheap to make and hash (about 3× faster than the 96-bit
ones a plain shift would give). Only *full* engine blocks get a key (the partial last block and
anything past the prompt are never hashed, as for real tokens); the keys of one trace block are
a contiguous range, built at C speed.

Scopes keep tenants apart: `scope_j` is the tenant's prefix-hash scope (tenant name and
permission version under the model's root, from the engine), so two tenants never share a
private block. Trace ids declared public (`public_ids`) use the engine's public scope while they
form the *leading* run of a prompt; those tokens are passed as `public_prefix_tokens`, so the
engine accounts their blocks to no tenant, exactly like a configured public text prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_KEY_BITS = 60  # keys stay two-digit CPython ints


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    block_hashes: list[int]
    public_prefix_tokens: int


class PrefixBlockMapper:
    """Maps one trace's prefix ids to engine block hashes. Stateless per request: O(prompt blocks)."""

    def __init__(
        self, *, block_tokens: int, trace_block_tokens: int, public_scope: int, public_ids: frozenset[int] = frozenset()
    ) -> None:
        if block_tokens < 1 or trace_block_tokens < 1:
            raise ValueError("block sizes must be positive")
        self.block_tokens = block_tokens
        self.trace_block_tokens = trace_block_tokens
        self.public_scope = public_scope
        self.public_ids = public_ids
        # room for the sub-index: at most ceil(P / B) engine blocks end in one trace block
        sub_bits = (-(-trace_block_tokens // block_tokens) + 1).bit_length()
        self._shift = sub_bits
        self._mask = (1 << (_KEY_BITS - sub_bits)) - 1

    def map(self, prefix_ids: Sequence[int], num_prompt_tokens: int, tenant_scope: int) -> PromptBlocks:
        bt, tbt, shift, mask = self.block_tokens, self.trace_block_tokens, self._shift, self._mask
        num_full = num_prompt_tokens // bt
        hashes: list[int] = []
        h = 0
        public = bool(self.public_ids)
        num_public_ids = 0
        for j, block_id in enumerate(prefix_ids):
            lo = j * tbt // bt
            if lo >= num_full:
                break
            public = public and block_id in self.public_ids
            num_public_ids += public
            h = hash((h, self.public_scope if public else tenant_scope, block_id))
            base = (h & mask) << shift
            hashes.extend(range(base, base + min((j + 1) * tbt // bt, num_full) - lo))
        public_tokens = min(num_public_ids * tbt, num_prompt_tokens)
        return PromptBlocks(hashes, public_tokens)
