"""value_density: reuse × saved prefill / bytes, GDSF aging, reuse estimated from hits."""

import pytest

from reference_engine.policies.base import EntryMeta
from reference_engine.policies.value_density import MIB, ValueDensityIndex
from tests.helpers import access


def index(prior: float = 1.0, half_life_s: float = 10.0) -> ValueDensityIndex:
    return ValueDensityIndex(bytes_per_block=2 * MIB, half_life_s=half_life_s, prior_reuse=prior, history_capacity=100)


def meta(saved_ms: float, blocks: int = 1) -> EntryMeta:
    return EntryMeta(size_blocks=blocks, saved_prefill_s=saved_ms / 1000)


def test_the_lowest_value_per_byte_goes_first():
    vd = index()
    vd.insert(["cheap"], meta(10), 0.0)  # 10 ms per 2 MiB
    vd.insert(["big"], meta(40, blocks=8), 0.0)  # 40 ms per 16 MiB: 2.5 ms/MiB, the lowest
    vd.insert(["dear"], meta(100), 0.0)
    assert vd.priority_of("cheap") == pytest.approx(5.0)  # 1 × 10 ms / 2 MiB
    assert vd.pop_victims(9, 1.0) == ["big", "cheap"]
    assert vd.inflation == pytest.approx(5.0)  # L rose to the last victim's priority


def test_observed_hits_raise_expected_reuse_and_decay_with_their_half_life():
    vd = index(prior=1.0, half_life_s=10.0)
    vd.insert(["k"], meta(10), 0.0)
    vd.remove("k", 0.0)  # a hit: live again; the count survives until it comes back
    vd.insert(["k"], meta(10), 10.0)  # one half-life later: reuse = 1 + 0.5
    assert vd.priority_of("k") == pytest.approx(1.5 * 5.0)
    access(vd, "k", 10.0, meta(10))  # another hit: 1 + (0.5 + 1)
    assert vd.priority_of("k") == pytest.approx(2.5 * 5.0)


def test_aging_lets_a_new_entry_outrank_an_old_one_that_stopped_being_used():
    vd = index()
    vd.insert(["old"], meta(30), 0.0)  # priority 0 + 15
    vd.insert(["filler"], meta(20), 0.0)  # priority 10
    vd.pop_victims(1, 1.0)  # evicts "filler": L = 10
    vd.insert(["new"], meta(20), 2.0)  # same worth as "filler", but aged in: 10 + 10 = 20 > 15
    assert vd.pop_victims(1, 3.0) == ["old"]


def test_an_evicted_key_starts_over():
    vd = index()
    vd.insert(["b"], meta(10), 0.0)
    vd.remove("b", 0.0)
    vd.insert(["b"], meta(10), 0.0)
    assert vd.pop_victims(1, 0.0) == ["b"]
    vd.insert(["b"], meta(10), 0.0)  # the same block id, new content: no inherited hits
    assert vd.priority_of("b") == pytest.approx(vd.inflation + 5.0)


def test_ties_go_in_insertion_order_so_a_chain_is_evicted_from_its_tail():
    vd = index()
    vd.insert(["tail", "mid", "head"], meta(10), 0.0)
    assert vd.pop_victims(3, 1.0) == ["tail", "mid", "head"]
