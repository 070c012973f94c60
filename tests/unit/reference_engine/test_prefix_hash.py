"""Block hashes: a chain from a secret root over fixed-width fields, scoped by tenant and salt."""

import hashlib
from array import array

import pytest

from reference_engine.config import TierKeyScope, TrafficClass
from reference_engine.core.prefix_hash import BlockHasher, tier_key
from reference_engine.request import Request

KEY = b"k" * 32


def hashes(
    hasher: BlockHasher, tokens: list[int], scope: int, public_tokens: int = 0, tier_scope: int | None = None
) -> list[int]:
    r = Request(
        request_id="r",
        tenant="t",
        traffic_class=TrafficClass.INTERACTIVE,
        num_prompt_tokens=len(tokens),
        max_new_tokens=1,
        arrival_s=0.0,
        prompt_token_ids=tokens,
        hash_scope=scope,
        public_prefix_tokens=public_tokens,
        tier_scope=tier_scope,
    )
    hasher.extend(r)
    return r.block_hashes


def test_the_chain_depends_on_the_engines_secret_and_on_every_earlier_block():
    tokens = list(range(48))
    a, b = BlockHasher(16, "m", KEY), BlockHasher(16, "m", KEY)
    scope = a.tenant_scope("acme")
    assert hashes(a, tokens, scope) == hashes(b, tokens, scope) and len(hashes(a, tokens, scope)) == 3
    assert set(hashes(BlockHasher(16, "m", b"x" * 32), tokens, scope)).isdisjoint(hashes(a, tokens, scope))
    changed = hashes(a, [99, *tokens[1:]], scope)
    assert set(changed).isdisjoint(hashes(a, tokens, scope))  # a change in block 0 changes every later hash


def test_ids_pack_at_a_fixed_width_so_nothing_wraps_into_a_collision():
    hasher = BlockHasher(16, "m", KEY)
    scope, tokens = hasher.tenant_scope("acme"), list(range(16))
    for shift in ((1 << 61) - 1, 1 << 32):
        assert hashes(hasher, [t + shift for t in tokens], scope) != hashes(hasher, tokens, scope)
    with pytest.raises(OverflowError):  # not silently masked into 64 bits
        hashes(hasher, [t + (1 << 64) for t in tokens], scope)


def test_tenants_and_salts_never_share_and_a_salt_shares_with_itself():
    hasher = BlockHasher(16, "m", KEY)
    acme, globex, tokens = hasher.tenant_scope("acme"), hasher.tenant_scope("globex"), list(range(32))
    salted = hasher.salted_scope(acme, "alice")
    assert salted == hasher.salted_scope(acme, "alice")
    scopes = [acme, globex, salted, hasher.salted_scope(acme, "bob"), hasher.salted_scope(globex, "alice")]
    assert len({h for s in scopes for h in hashes(hasher, tokens, s)}) == 2 * len(scopes)
    # a public prefix is shared across tenants: its blocks ignore the tenant's scope
    assert hashes(hasher, tokens, acme, public_tokens=16)[0] == hashes(hasher, tokens, globex, public_tokens=16)[0]


def test_a_block_hash_is_the_documented_blake2b_chain_so_it_is_stable_for_a_key():
    """Pins the layout: a faster implementation must give the very same hashes."""
    hasher, tokens = BlockHasher(16, "m", KEY), list(range(40, 72))
    scope = hasher.tenant_scope("acme").to_bytes(8, "little")
    parent = hashlib.blake2b(b"model:m", key=KEY, digest_size=16).digest()
    expected = []
    for lo in (0, 16):
        parent = hashlib.blake2b(parent + scope + array("q", tokens[lo : lo + 16]).tobytes(), digest_size=16).digest()
        expected.append(int.from_bytes(parent, "little"))
    assert hashes(hasher, tokens, hasher.tenant_scope("acme")) == expected


def test_a_split_key_keeps_the_gpu_scoped_while_its_tier_half_drops_the_salt_or_the_tenant():
    """`tiers.key_scope` other than request: two salts (no_salt) or two tenants (no_tenant) get
    different keys in the GPU pool, and one key in the tiers; other content never meets."""
    hasher, tokens = BlockHasher(16, "m", KEY), list(range(48))
    acme, globex = hasher.tenant_scope("acme"), hasher.tenant_scope("globex")
    salt = TierKeyScope.NO_SALT
    s1, s2 = hasher.salted_scope(acme, "s1"), hasher.salted_scope(acme, "s2")
    a = hashes(hasher, tokens, s1, tier_scope=hasher.tier_scope(salt, acme, "s1"))
    b = hashes(hasher, tokens, s2, tier_scope=hasher.tier_scope(salt, acme, "s2"))
    assert set(a).isdisjoint(b) and [tier_key(k) for k in a] == [tier_key(k) for k in b]
    tenant = TierKeyScope.NO_TENANT
    a = hashes(hasher, tokens, acme, tier_scope=hasher.tier_scope(tenant, acme, None))
    b = hashes(hasher, tokens, globex, tier_scope=hasher.tier_scope(tenant, globex, None))
    assert set(a).isdisjoint(b) and [tier_key(k) for k in a] == [tier_key(k) for k in b]
    other = hashes(hasher, [99, *tokens[1:]], globex, tier_scope=hasher.tier_scope(tenant, globex, None))
    assert {tier_key(k) for k in other}.isdisjoint(tier_key(k) for k in a)
    # the safe default splits nothing: the hashes are the plain chain
    assert hasher.tier_scope(TierKeyScope.REQUEST, acme, "s1") is None
    assert hasher.tier_scope(salt, acme, None) is None  # unsalted: nothing to drop
