"""The fleet's prefix index: content keys from the tokens in BlockStored, per worker, as events say."""

from __future__ import annotations

from reference_engine.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from reference_engine.routing import PrefixIndex, prompt_keys

TOKENS = list(range(64))  # four 16-token blocks


def test_a_prompt_matches_the_leading_blocks_each_worker_stored_in_chained_batches():
    index = PrefixIndex()
    index.apply(0, BlockStored([11, 12], None, TOKENS[:32], 16))
    index.apply(0, BlockStored([13, 14], 12, TOKENS[32:], 16))  # chained from its parent's key
    index.apply(1, BlockStored([91], None, TOKENS[:16], 16))  # the engine's hashes differ: keys do not
    assert index.match(prompt_keys(TOKENS + [7], 16)) == {0: 4, 1: 1}
    assert index.match(prompt_keys([5] * 32, 16)) == {} and index.num_blocks(0) == 4


def test_removal_clear_and_death_drop_what_a_worker_no_longer_holds():
    index = PrefixIndex()
    index.apply(0, BlockStored([11, 12, 13], None, TOKENS[:48], 16))
    index.apply(1, BlockStored([21, 22], None, TOKENS[:32], 16))
    index.apply(0, BlockRemoved([12]))
    assert index.match(prompt_keys(TOKENS, 16)) == {0: 1, 1: 2}
    index.apply(1, AllBlocksCleared())
    assert index.match(prompt_keys(TOKENS, 16)) == {0: 1}
    index.clear(0)
    assert index.match(prompt_keys(TOKENS, 16)) == {} and index.num_blocks(0) == 0


def test_two_copies_of_one_text_on_a_worker_keep_it_until_both_are_gone():
    """Two tenants' blocks of the same tokens: two engine hashes, one content key."""
    index = PrefixIndex()
    index.apply(0, BlockStored([11], None, TOKENS[:16], 16))
    index.apply(0, BlockStored([51], None, TOKENS[:16], 16))
    index.apply(0, BlockStored([11], None, TOKENS[:16], 16))  # announced twice: still one copy
    index.apply(0, BlockRemoved([11]))
    assert index.match(prompt_keys(TOKENS[:17], 16)) == {0: 1}
    index.apply(0, BlockRemoved([51]))
    assert index.match(prompt_keys(TOKENS[:17], 16)) == {}


def test_a_block_whose_parent_was_never_announced_is_counted_not_guessed():
    index = PrefixIndex()
    index.apply(0, BlockStored([13, 14], 12, TOKENS[32:], 16))  # the batch with 11, 12 was lost
    assert index.num_blocks(0) == 0 and index.num_unchained == 2


def test_blocks_without_tokens_are_keyed_by_their_hash_as_replay_gives_them():
    index = PrefixIndex()
    index.apply(2, BlockStored([7, 8, 9], None, [], 16))
    assert index.match([7, 8, 5]) == {2: 2}
