"""Chained block hashes for the prefix cache, from a secret root, scoped so that sharing is always safe.

A full block's hash covers its parent's hash, a *scope* and its exact tokens:

    h_-1 = BLAKE2b_key("model:" ‖ model scope)                                 the secret root
    h_i  = BLAKE2b(h_{i-1} ‖ scope_i ‖ int64(tokens[i·B : (i+1)·B]))          128 bits each

The root names model, tokenizer, adapter and chat template, so a cache never serves KV computed
under another of them. Blocks inside a declared public prefix use the public scope; every other
block uses its request's scope: the tenant's (tenant name + permission version), or, when the
request sent a `cache_salt`, one derived from the tenant's scope and that salt with the key. So
two tenants never share a private block even for identical text, two salts never share anything,
and bumping a tenant's permission version invalidates its cache. That is the `tenant` sharing
mode; an operator may choose to share more (`prefix_cache.sharing`): `salt` puts every tenant's
unsalted blocks in one shared scope (a salt still isolates: vLLM's behaviour), `global` also
ignores salts (an engine that has none). Both let a tenant time another's prompts by their hits,
which the `prefix_isolation` gate catches from outside.

The KV tiers below the GPU key a block by its hash too (core/tiers.py), so scoping holds there
as well. To rebuild the offload bug where a tier's key drops the salt or the tenant
(`tiers.key_scope`), a request then carries a weaker `tier_scope` and its keys are *split*:

    w_i   = BLAKE2b(w_{i-1} ‖ weak scope_i ‖ int64(tokens))[:8]         (w_-1: the root)
    key_i = w_i · 2^64 + BLAKE2b(w_i ‖ scope_i)[:8]                     `tier_key(key_i)` = w_i

The GPU pool still looks up the whole key (scoped: 64 bits of it separate the scopes), while the
tiers file the block under `w_i`, which another salt or tenant computes alike.

Why: a client chooses its prompt tokens, so the hash must resist crafted collisions (a block
planted under another prompt's key) and offline probing (a client that can compute keys can test
guesses of another tenant's prompt). BLAKE2b is collision-resistant; every field has a fixed
width (16 + 8 + 8·B bytes), so no two different inputs pack to the same bytes; a token id that
does not fit int64 is refused (`OverflowError`) instead of wrapping. The key is a secret of this
engine (random per process unless given) and enters every hash through the root, whose
descendants every block hash is: nobody outside the process can compute one (BLAKE2 has no
length extension, so a secret prefix is a MAC; keyed BLAKE2b would hash a whole extra key block
per call, for nothing). One unkeyed BLAKE2b per block (a copy of a prepared hasher, two updates:
no argument parsing per block), with the Python around it kept to a loop over slices, costs less
than vLLM's sha256 over a pickled tuple per block, and BLAKE2b stays
cheap on a CPU without SHA-256 in hardware (`bench/bench_block_pool.py --hash-only` measures
kvgate's and vLLM's in the same run).
"""

from __future__ import annotations

import hashlib
import secrets
from array import array
from itertools import repeat
from typing import Literal

from reference_engine.config import PrefixSharing, TierKeyScope
from reference_engine.request import Request
from reference_engine.stable_id import stable_id

HASH_BYTES = 16
HALF_BYTES = 8  # each half of a split key
KEY_BYTES = 32


class BlockHasher:
    """Computes `Request.block_hashes` incrementally as blocks fill up. Scopes are 63-bit ints
    (replay chains its trace ids under the same scopes); block hashes are 128-bit ints. O(B) per
    block hashed."""

    def __init__(
        self,
        block_tokens: int,
        model_scope: str,
        key: bytes | None = None,
        sharing: PrefixSharing = PrefixSharing.TENANT,
    ) -> None:
        self.block_tokens = block_tokens
        self.sharing = sharing
        self._key = key or secrets.token_bytes(KEY_BYTES)
        self._model_scope = model_scope
        self._root = self._keyed(f"model:{model_scope}".encode())
        self._public = stable_id(f"public:{model_scope}")
        self._shared = stable_id(f"shared:{model_scope}")  # every tenant's, unless `sharing` is tenant
        self._tenant_scopes: dict[tuple[str, int], int] = {}
        self._blank = hashlib.blake2b(digest_size=HASH_BYTES)  # copied per block: no argument parsing
        self._half = hashlib.blake2b(digest_size=HALF_BYTES)

    def _keyed(self, data: bytes) -> bytes:
        return hashlib.blake2b(data, key=self._key, digest_size=HASH_BYTES).digest()

    def tenant_scope(self, tenant: str, permission_version: int = 0) -> int:
        if self.sharing is not PrefixSharing.TENANT:
            return self._shared
        key = (tenant, permission_version)
        scope = self._tenant_scopes.get(key)
        if scope is None:
            scope = self._tenant_scopes[key] = stable_id(f"tenant:{tenant}:v{permission_version}:{self._model_scope}")
        return scope

    @property
    def honours_salt(self) -> bool:
        return self.sharing is not PrefixSharing.GLOBAL

    def salted_scope(self, tenant_scope: int, salt: str) -> int:
        """The scope of a tenant's requests that sent `cache_salt = salt`. Keyed: a client cannot
        search for two salts whose scopes meet, since it cannot compute a scope."""
        digest = self._keyed(b"salt:" + tenant_scope.to_bytes(8, "little") + salt.encode())
        return int.from_bytes(digest[:8], "little") >> 1

    @property
    def public_scope(self) -> int:
        return self._public

    def tier_scope(self, key_scope: TierKeyScope, tenant_scope: int, salt: str | None) -> int | None:
        """The weaker scope the tiers key a request's blocks by (None: its own, the safe
        default). `salt` is the cache_salt the request's scope honours, if any."""
        if key_scope is TierKeyScope.NO_SALT:
            return tenant_scope if salt is not None else None
        if key_scope is TierKeyScope.NO_TENANT:
            return self.salted_scope(self._shared, salt) if salt is not None else self._shared
        return None

    def extend(self, request: Request) -> None:
        """Append hashes for every block of `request` that is full and not hashed yet."""
        bt = self.block_tokens
        hashes = request.block_hashes
        if request.prompt_token_ids is None:
            # Replay: prompt hashes were given; blocks past them have no tokens to hash.
            if not hashes and request.prompt_block_hashes:
                hashes.extend(request.prompt_block_hashes)
            return
        num_full = request.num_tokens // bt
        first = len(hashes)
        if first >= num_full:
            return
        packed = array("q", request.token_ids(first * bt, num_full * bt)).tobytes()
        num_new, num_public = num_full - first, max(0, request.public_prefix_tokens // bt - first)
        scopes = [self._public.to_bytes(8, "little")] * min(num_public, num_new)
        scopes += [request.hash_scope.to_bytes(8, "little")] * (num_new - len(scopes))
        if request.tier_scope is not None:
            self._extend_split(request, packed, scopes, min(num_public, num_new))
            return
        parent = hashes[-1].to_bytes(HASH_BYTES, "little") if hashes else self._root
        blank, width, digests = self._blank, 8 * bt, []
        for scope, at in zip(scopes, range(0, len(packed), width)):
            h = blank.copy()
            h.update(parent + scope)
            h.update(packed[at : at + width])
            parent = h.digest()
            digests.append(parent)
        little: repeat[Literal["little"]] = repeat("little", num_new)  # map over a bound method: fastest
        hashes.extend(map(int.from_bytes, digests, little))

    def _extend_split(self, request: Request, packed: bytes, scopes: list[bytes], num_public: int) -> None:
        """`extend` for a request whose tiers drop part of its scope: split keys (module docstring)."""
        assert request.tier_scope is not None
        hashes, width = request.block_hashes, 8 * self.block_tokens
        weak = [self._public.to_bytes(8, "little")] * num_public
        weak += [request.tier_scope.to_bytes(8, "little")] * (len(scopes) - num_public)
        parent = tier_key(hashes[-1]).to_bytes(HALF_BYTES, "little") if hashes else self._root
        for scope, weak_scope, at in zip(scopes, weak, range(0, len(packed), width)):
            h = self._half.copy()
            h.update(parent + weak_scope)
            h.update(packed[at : at + width])
            parent = h.digest()
            tag = self._half.copy()
            tag.update(parent + scope)
            hashes.append(int.from_bytes(parent, "little") << 64 | int.from_bytes(tag.digest(), "little"))


def tier_key(block_hash: int) -> int:
    """The key a tier that drops part of the scope files a block under: the weak half of a
    split key; a key too short to be split (replay's) stands for itself."""
    return block_hash >> 64 or block_hash
