"""Chained block hashes for the prefix cache, scoped so that sharing is always safe.

A full block's hash covers its parent's hash, a *scope* and its exact tokens:

    h_i = H(h_{i-1}, scope_i, tokens[i·B : (i+1)·B])

The root scope names model, tokenizer, adapter and chat template, so a cache never serves KV
computed under another of them. Blocks inside a declared public prefix use the public scope;
every later block uses the tenant's scope (tenant name + permission version), so two tenants
never share a private block even for identical text, and bumping a tenant's permission version
invalidates its cache. `H` is Python's tuple hash of ints (deterministic across processes, fast)
or sha256 when the config asks for collision resistance against adversarial prompts.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

from reference_engine.core.request import Request


def stable_id(text: str) -> int:
    """A process-independent 63-bit integer for a string (Python's str hash is salted)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def _builtin(parent: int, scope: int, tokens: Sequence[int]) -> int:
    return hash((parent, scope, tuple(tokens)))


def _sha256(parent: int, scope: int, tokens: Sequence[int]) -> int:
    data = struct.pack(f"<qq{len(tokens)}Q", parent, scope, *(t & 0xFFFFFFFFFFFFFFFF for t in tokens))
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little", signed=True)


class BlockHasher:
    """Computes `Request.block_hashes` incrementally as blocks fill up."""

    def __init__(self, block_tokens: int, model_scope: str, algorithm: str = "builtin") -> None:
        self.block_tokens = block_tokens
        self._root = stable_id(f"model:{model_scope}")
        self._public = stable_id(f"public:{model_scope}")
        self._tenant_scopes: dict[tuple[str, int], int] = {}
        self._hash = _builtin if algorithm == "builtin" else _sha256

    def tenant_scope(self, tenant: str, permission_version: int = 0) -> int:
        key = (tenant, permission_version)
        scope = self._tenant_scopes.get(key)
        if scope is None:
            scope = self._tenant_scopes[key] = stable_id(f"tenant:{tenant}:v{permission_version}:{self._root}")
        return scope

    @property
    def public_scope(self) -> int:
        return self._public

    def extend(self, request: Request, tenant_scope: int) -> None:
        """Append hashes for every block of `request` that is full and not hashed yet."""
        bt = self.block_tokens
        hashes = request.block_hashes
        if request.prompt_token_ids is None:
            # Replay: prompt hashes were given; blocks past them have no tokens to hash.
            if not hashes and request.prompt_block_hashes:
                hashes.extend(request.prompt_block_hashes)
            return
        num_full = request.num_tokens // bt
        if len(hashes) >= num_full:
            return
        prompt, output = request.prompt_token_ids, request.output_token_ids
        n_prompt = len(prompt)
        num_public = request.public_prefix_tokens // bt
        parent = hashes[-1] if hashes else self._root
        for i in range(len(hashes), num_full):
            lo, hi = i * bt, (i + 1) * bt
            tokens = prompt[lo:hi] if hi <= n_prompt else (prompt[lo:] + output[: hi - n_prompt] if lo < n_prompt
                                                            else output[lo - n_prompt: hi - n_prompt])
            parent = self._hash(parent, self._public if i < num_public else tenant_scope, tokens)
            hashes.append(parent)
