"""h2o: keeps the highest-scored tokens + the recent window; scores decay; the sim supplies attention."""

import numpy as np
import pytest

from reference_engine import EventKind
from reference_engine.config import TrafficClass
from reference_engine.executors.sim_attention import (
    SINK_MASS,
    SINK_TOKENS,
    SyntheticAttention,
    SyntheticScores,
    synthetic_attention,
)
from reference_engine.policies.h2o import DenseScores, H2oCompressor, HeavyHitterRule
from reference_engine.request import Request
from tests.helpers import Driver, small_config


def compressor(**kw) -> H2oCompressor:
    args = dict(heavy_hitter_ratio=0.1, recent_tokens=16, score_decay=0.5, min_tokens=32, block_tokens=16)
    return H2oCompressor(**{**args, **kw})


def running(n: int) -> Request:
    r = Request("r", "acme", TrafficClass.INTERACTIVE, num_prompt_tokens=n, max_new_tokens=8, arrival_s=0.0)
    r.num_computed_tokens = n
    return r


def test_it_keeps_the_highest_scored_tokens_and_the_recent_window():
    attention = np.linspace(0.0, 0.1, 100)[::-1].copy()  # earlier tokens score higher ...
    heavy = [7, 23, 41, 55, 60, 61, 70, 77, 80, 83]  # ... except these ten, far above the rest
    attention[heavy] = 5.0 + np.arange(10)
    keep = compressor().plan_keep(running(100), attention, lambda: 0)
    # heavy = ⌈0.1 × 100⌉ = 10 among tokens 0..83, plus the last 16
    assert keep.tolist() == heavy + list(range(84, 100))


def test_a_shared_prefix_is_kept_and_the_heavy_hitters_are_chosen_after_it():
    attention = np.zeros(100)
    attention[[1, 2, 40, 50]] = 1.0
    keep = compressor(heavy_hitter_ratio=0.02).plan_keep(running(100), attention, lambda: 32)
    assert keep.tolist() == list(range(32)) + [40, 50] + list(range(84, 100))


def test_scores_accumulate_with_decay_and_follow_the_compaction():
    c = compressor(min_tokens=1000)  # never compresses: watch the scores
    r = running(4)
    c.plan_keep(r, [1.0, 0.0, 0.0, 1.0], lambda: 0)
    r.num_computed_tokens = 5
    c.plan_keep(r, [0.0, 1.0, 0.0, 0.0, 2.0], lambda: 0)
    assert c.scores("r").tolist() == [0.5, 1.0, 0.0, 0.5, 2.0]
    c.forget("r")
    assert c.scores("r") is None


def test_nothing_is_dropped_below_min_tokens_or_without_a_block_to_gain():
    assert compressor(min_tokens=200).plan_keep(running(100), np.ones(100), lambda: 0) is None
    assert compressor(heavy_hitter_ratio=0.8).plan_keep(running(100), np.ones(100), lambda: 0) is None


def test_synthetic_attention_is_deterministic_heavy_tailed_and_has_sinks():
    positions = np.arange(2000)
    mass = synthetic_attention(7, positions, 3)
    assert mass.sum() == pytest.approx(3.0) and np.array_equal(mass, synthetic_attention(7, positions, 3))
    assert mass[:SINK_TOKENS].sum() == pytest.approx(3 * SINK_MASS)
    others = np.sort(mass[SINK_TOKENS:])[::-1]
    assert others[:100].sum() > 0.3 * others.sum()  # 5 % of the tokens draw a large share: heavy-tailed
    assert not np.array_equal(mass, synthetic_attention(8, positions, 3))
    # a token's rank does not depend on which others are held
    held = positions[::3]
    assert np.array_equal(np.argsort(synthetic_attention(7, held, 1)[2:]), np.argsort(mass[held][2:]))


@pytest.mark.parametrize("decay", [0.98, 0.5])
def test_the_closed_form_scores_equal_the_recurrence_over_the_materialised_attention(decay):
    """SyntheticScores (O(new tokens) per step) against DenseScores fed `synthetic_attention` (the
    definition, O(KV) per step): prefill chunks, decodes, compactions that drop sinks and middle
    tokens, and enough steps at decay 0.5 to fold the scale back several times."""
    seed, rng = 11, np.random.default_rng(3)
    r = running(0)
    closed, dense = SyntheticScores(seed, decay), DenseScores(decay)
    for step in range(2400):
        n = 3 if step == 0 else (40 if step < 5 else 1)  # a prefill whose first chunk holds some sinks
        r.num_computed_tokens += n
        closed.add_step(r, SyntheticAttention(seed, n))
        dense.add_step(r, synthetic_attention(seed, r.kv_positions(), n))
        np.testing.assert_allclose(closed.values(), dense.values(), rtol=1e-9, atol=1e-300)
        if step % 97 == 96:  # a compaction: drop a random third, sinks included
            kv = r.num_kv_tokens
            keep = np.sort(rng.choice(kv, size=kv - kv // 3, replace=False))
            r.kept_positions = r.kv_positions()[keep]
            r.num_dropped_tokens += kv - len(keep)
            closed.keep(keep)
            dense.keep(keep)
    assert len(closed) == r.num_kv_tokens


def test_the_sim_hands_h2o_its_attention_in_closed_form():
    c = compressor(min_tokens=1000)
    r = running(50)
    c.plan_keep(r, SyntheticAttention(5, 50), lambda: 0)
    np.testing.assert_allclose(c.scores("r"), synthetic_attention(5, np.arange(50), 50))


def test_the_sim_engine_compresses_long_sequences_and_keeps_sinks_and_the_recent_window():
    d = Driver(
        small_config(
            overrides={
                "kv_cache.policy": "h2o",
                "h2o.recent_window_tokens": 32,
                "h2o.min_tokens_to_compress": 64,
                "h2o.heavy_hitter_ratio": 0.25,
            }
        )
    )
    r = d.add(prompt_len=200, max_new=40)
    d.step()  # the prefill: 200 tokens, then compaction to 32 recent + ⌈0.25 × 200⌉ heavy
    assert r.approximate and r.num_kv_tokens == 32 + 50
    kept = r.kv_positions()
    assert kept[:SINK_TOKENS].tolist() == list(range(SINK_TOKENS))  # the sinks draw the most attention
    assert kept[-32:].tolist() == list(range(168, 200))
    scores = d.core.policy.compressor.scores(r.request_id)
    assert len(scores) == r.num_kv_tokens
    d.run()
    assert [e.mode for e in d.core.events if e.kind is EventKind.APPROXIMATED][0] == "h2o"
    d.core.pool.check_invariants()
    assert d.core.pool.num_live == 0


def _state(scores: SyntheticScores) -> tuple:
    held = len(scores)
    return (
        scores._weights[:held].tobytes(),
        scores._born[:held].tobytes(),
        scores._total,
        scores._h,
        scores._h_sink,
        scores._scale,
        scores._num_sinks,
    )


@pytest.mark.parametrize("chunk", [1, 40])
def test_add_steps_is_add_step_repeated_float_for_float(chunk):
    """Fused runs stand for many steps with one `add_steps`: the same floats, bit for bit, as
    `add_step` once per step, across compactions and (decay 0.5) several rescales."""
    seed, rng = 13, np.random.default_rng(4)
    requests, scores = [running(0), running(0)], [SyntheticScores(seed, 0.5), SyntheticScores(seed, 0.5)]
    for r, s in zip(requests, scores):  # a first chunk with the sinks, then a compaction
        r.num_computed_tokens = 300
        s.add_step(r, SyntheticAttention(seed, 300))
        keep = np.sort(rng.choice(300, size=200, replace=False))
        rng = np.random.default_rng(4)  # the same compaction for both
        r.kept_positions, r.num_dropped_tokens = r.kv_positions()[keep], 100
        s.keep(keep)
    one_by_one, fused = scores
    for num_steps in [1, 7, 300, 2, 900, 64]:
        first = requests[0].num_computed_tokens
        for _ in range(num_steps):
            requests[0].num_computed_tokens += chunk
            one_by_one.add_step(requests[0], SyntheticAttention(seed, chunk))
        assert fused.in_step(requests[1])
        requests[1].num_computed_tokens += chunk * num_steps
        fused.add_steps(first, chunk, num_steps)
        assert _state(fused) == _state(one_by_one)


def test_a_request_out_of_step_with_its_scores_is_not_fused():
    c, r = compressor(min_tokens=1000), running(50)
    assert c.compaction_rule(r, 0) is None  # no scores yet: its first step learns them
    c.plan_keep(r, SyntheticAttention(5, 50), lambda: 0)
    assert c.compaction_rule(r, 0) is not None
    r.num_computed_tokens += 1
    assert c.compaction_rule(r, 0) is None  # a token the scores have not seen
    dense = compressor(min_tokens=1000)
    dense.plan_keep(r, None, lambda: 0)
    assert dense.compaction_rule(r, 0) is None  # real attention: no closed form to skip with


@pytest.mark.parametrize("ratio", [0.2, 0.05, 1.0])
def test_the_heavy_hitter_rule_names_the_step_plan_keep_compacts_at(ratio):
    """HeavyHitterRule.next_compaction against plan_keep itself, stepped one token chunk at a
    time: the same step, and the same number of tokens kept."""
    rng = np.random.default_rng(8)
    for _ in range(200):
        c = compressor(
            heavy_hitter_ratio=ratio, recent_tokens=int(rng.integers(16, 64)), min_tokens=int(rng.integers(16, 400))
        )
        chunk, protected = int(rng.choice([1, 1, 5, 16, 64])), int(rng.integers(0, 48))
        r = running(int(rng.integers(1, 300)))
        r.num_dropped_tokens = int(rng.integers(0, r.num_computed_tokens))
        within = int(rng.integers(1, 80))
        expected, kv, computed = None, r.num_kv_tokens, r.num_computed_tokens
        for step in range(1, within + 1):
            r.num_computed_tokens += chunk
            keep = c.plan_keep(r, None, lambda protected=protected: protected)
            if keep is not None:
                expected = (step, len(keep))
                break
        assert HeavyHitterRule(c, protected).next_compaction(kv, computed, chunk, within) == expected


def test_the_negated_scores_h2o_ranks_are_the_scores_negated_bit_for_bit():
    r, scores = running(0), SyntheticScores(21, 0.9)
    for n in (2, 300, 1, 1, 40):  # the first step holds some sinks only
        r.num_computed_tokens += n
        scores.add_step(r, SyntheticAttention(21, n))
    for start, stop in [(0, 344), (0, 3), (1, 2), (2, 100), (4, 344), (100, 101)]:
        assert scores.negated(start, stop).tobytes() == (-scores.values()[start:stop]).tobytes(), (start, stop)
