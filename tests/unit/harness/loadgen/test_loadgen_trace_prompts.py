"""Trace prompts: shared hash ids give shared prompt prefixes, block by block; distinct ids do not."""

from __future__ import annotations

import os

from harness.loadgen.prompts import TokenModel, count_tokens
from harness.loadgen.trace_prompts import trace_prompt

BLOCK = 512


def content_words(ids: list[int], num_tokens: int, seed: str = "x") -> list[str]:
    prompt = trace_prompt(ids, num_tokens, block_tokens=BLOCK, filler_seed=seed)
    assert count_tokens(prompt.messages) == prompt.num_tokens == num_tokens
    return prompt.messages[0]["content"].split()


def shared_words(a: list[str], b: list[str]) -> int:
    return len(os.path.commonprefix([a, b]))


def test_shared_hash_ids_share_exactly_their_blocks() -> None:
    a = content_words([0, 1, 2], 1400, "a")
    b = content_words([0, 1, 7], 1300, "b")
    assert shared_words(a, b) == 2 * BLOCK


def test_the_same_chain_gives_the_same_text() -> None:
    assert content_words([5, 6, 7], 1500, "a") == content_words([5, 6, 7], 1500, "b")


def test_a_shorter_prompt_of_the_same_chain_is_a_prefix_of_the_longer() -> None:
    long, short = content_words([5, 6, 7], 1500), content_words([5, 6], 700)
    assert long[: len(short)] == short


def test_distinct_first_ids_share_nothing() -> None:
    assert shared_words(content_words([1, 2], 1000), content_words([3, 2], 1000)) == 0


def test_an_id_after_a_different_parent_is_different_text() -> None:
    """Block text names the whole chain: id 9 after 1 is not id 9 after 2."""
    a, b = content_words([1, 9], 1000), content_words([2, 9], 1000)
    assert a[BLOCK:] != b[BLOCK:]


def test_traces_without_ids_share_nothing_and_keep_their_length() -> None:
    a = trace_prompt((), 300, block_tokens=None, filler_seed="azure-1")
    b = trace_prompt((), 300, block_tokens=None, filler_seed="azure-2")
    assert a.num_tokens == b.num_tokens == 300
    assert shared_words(a.messages[0]["content"].split(), b.messages[0]["content"].split()) < 3


def test_a_tiny_prompt_is_the_smallest_a_message_can_be() -> None:
    assert trace_prompt((), 1, block_tokens=None, filler_seed="t").num_tokens == count_tokens(
        [{"role": "user", "content": "x"}]
    )


BPE = TokenModel(per_word=1.6, per_message=4, base=3, per_other_word=1.4)  # a tokenizer that splits words


def test_sizes_are_in_the_targets_tokens_and_blocks_stay_shared() -> None:
    """On a target whose words cost 1.6 tokens a block is 320 words, and prompts cost what the
    trace says in its tokens."""
    a = trace_prompt([0, 1, 2], 1400, block_tokens=BLOCK, filler_seed="a", tokens=BPE)
    b = trace_prompt([0, 1, 7], 1300, block_tokens=BLOCK, filler_seed="b", tokens=BPE)
    assert abs(a.num_tokens - 1400) <= 1 and abs(b.num_tokens - 1300) <= 1
    assert a.num_tokens == BPE.count(a.messages)
    a_words, b_words = a.messages[0]["content"].split(), b.messages[0]["content"].split()
    assert shared_words(a_words, b_words) == 2 * BPE.words_for(BLOCK) == 640
