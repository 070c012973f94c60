"""Trace prefix ids -> engine block hashes: counts, sharing, tenant scoping, public ids."""

from harness.replay.prefix_blocks import PrefixBlockMapper

ACME, GLOBEX, PUBLIC = 11, 22, 33


def mapper(block_tokens=16, public_ids=frozenset()) -> PrefixBlockMapper:
    return PrefixBlockMapper(
        block_tokens=block_tokens, trace_block_tokens=512, public_scope=PUBLIC, public_ids=public_ids
    )


def test_only_full_engine_blocks_are_hashed():
    m = mapper()
    assert len(m.map((1, 2, 3), 1100, ACME).block_hashes) == 68  # 1100 // 16; the 12-token tail is not
    assert len(m.map((1, 2), 1024, ACME).block_hashes) == 64
    assert len(m.map((1,), 15, ACME).block_hashes) == 0


def test_equal_leading_ids_give_equal_leading_hashes_and_no_more():
    m = mapper()
    a = m.map((1, 2, 3), 1536, ACME).block_hashes
    b = m.map((1, 2, 9), 1536, ACME).block_hashes
    assert a[:64] == b[:64] and not set(a[64:]) & set(b[64:])
    c = m.map((7, 2, 3), 1536, ACME).block_hashes  # same later ids after a different first: nothing shared
    assert not set(a) & set(c)
    assert len(set(a)) == len(a)


def test_tenants_never_share_a_private_block():
    m = mapper()
    assert not set(m.map((1, 2), 1024, ACME).block_hashes) & set(m.map((1, 2), 1024, GLOBEX).block_hashes)


def test_leading_public_ids_are_shared_and_counted_as_public_tokens():
    m = mapper(public_ids=frozenset({0, 5}))
    a = m.map((0, 1, 2), 1300, ACME)
    g = m.map((0, 1, 2), 1300, GLOBEX)
    assert a.public_prefix_tokens == g.public_prefix_tokens == 512
    assert a.block_hashes[:32] == g.block_hashes[:32] and not set(a.block_hashes[32:]) & set(g.block_hashes[32:])
    assert m.map((1, 0), 1024, ACME).public_prefix_tokens == 0  # public only while leading
    assert m.map((0, 5, 1), 1100, ACME).public_prefix_tokens == 1024
    assert m.map((0,), 300, ACME).public_prefix_tokens == 300  # never more than the prompt


def test_block_sizes_that_do_not_divide_the_trace_block():
    m = mapper(block_tokens=48)  # engine block 10 covers tokens 480..527: it ends in trace block 1
    a = m.map((1, 2, 3), 1536, ACME).block_hashes
    b = m.map((1, 9, 3), 1536, ACME).block_hashes
    assert len(a) == 32
    assert a[:10] == b[:10] and a[10] != b[10]
