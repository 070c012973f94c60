"""Greedy output of the torch executor is the same however the engine gets there: uninterrupted,
preempted by recompute mid-decode, swapped out and back in, or starting from a prefix-cache hit.

Every run goes through a real EngineCore on a virtual clock; the pressure runs use a 48-block
pool that two requests of 25 blocks each cannot share, so preemption really happens.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

from reference_engine import EventKind, FinishReason  # noqa: E402
from tests.torch_helpers import make_core, run_to_end, torch_config  # noqa: E402

pytestmark = pytest.mark.torch
PROMPT, NEW = 200, 200  # 400 tokens = 25 blocks per request


def prompt(seed: int, n: int = PROMPT) -> list[int]:
    """Word ids, some beyond the model's vocabulary (folded in by the executor)."""
    rng = random.Random(seed)
    return [rng.randrange(5, 4096) if i % 7 else 4096 + rng.randrange(10**9) for i in range(n)]


@pytest.fixture(scope="module")
def solo_outputs() -> dict[int, list[int]]:
    """(a) Each request alone in a roomy pool: the uninterrupted reference."""
    out = {}
    for seed in (1, 2):
        core = make_core(torch_config(256, prefix_cache__enabled=False))
        r = core.add_request(tenant="acme", prompt_token_ids=prompt(seed), max_new_tokens=NEW)
        run_to_end(core)
        assert r.finish_reason is FinishReason.LENGTH and r.num_preemptions == 0
        out[seed] = r.output_token_ids
    return out


def run_pair_under_pressure(mode: str):
    core = make_core(torch_config(48, preemption__mode=mode, prefix_cache__enabled=False))
    # two tenants: one tenant's reservations may not exceed the pool, two together may
    reqs = {
        seed: core.add_request(tenant=tenant, prompt_token_ids=prompt(seed), max_new_tokens=NEW)
        for seed, tenant in ((1, "acme"), (2, "globex"))
    }
    run_to_end(core)
    preempted = [e for e in core.events if e.kind is EventKind.PREEMPTED]
    return core, reqs, preempted


def test_uninterrupted_outputs_are_valid_engine_words(solo_outputs):
    for tokens in solo_outputs.values():
        assert len(tokens) == NEW and all(5 <= t < 4096 for t in tokens)
    assert solo_outputs[1] != solo_outputs[2]


def test_recompute_preemption_mid_decode_gives_identical_greedy_output(solo_outputs):
    core, reqs, preempted = run_pair_under_pressure("recompute")
    assert preempted and {e.mode for e in preempted} == {"recompute"}
    victims = [r for r in reqs.values() if r.num_preemptions]
    assert any(r.recompute_tokens > r.num_prompt_tokens for r in victims), "preempted after decoding began"
    for seed, r in reqs.items():
        assert r.finish_reason is FinishReason.LENGTH
        assert r.output_token_ids == solo_outputs[seed]


def test_swap_out_and_in_gives_identical_greedy_output(solo_outputs):
    core, reqs, preempted = run_pair_under_pressure("swap")
    assert preempted and {e.mode for e in preempted} == {"swap"}
    resumed = [e for e in core.events if e.kind is EventKind.RESUMED and e.mode == "swap"]
    assert resumed, "a swapped request came back"
    victim = reqs_by_id(reqs)[preempted[0].request_id]
    assert preempted[0].t_s > victim.first_token_s, "swapped out mid-decode"
    for seed, r in reqs.items():
        assert r.output_token_ids == solo_outputs[seed]
    assert core.executor._host == {}, "host copies are released once swapped back in"


def reqs_by_id(reqs):
    return {r.request_id: r for r in reqs.values()}


def test_prefix_cache_hit_gives_identical_greedy_output():
    shared = prompt(3, 160)
    follow_up = shared + prompt(4, 40)
    cold = make_core(torch_config(256, prefix_cache__enabled=False))
    ref = cold.add_request(tenant="acme", prompt_token_ids=follow_up, max_new_tokens=40)
    run_to_end(cold)

    warm = make_core(torch_config(256))
    warm.add_request(tenant="acme", prompt_token_ids=shared, max_new_tokens=8)
    run_to_end(warm)
    hit = warm.add_request(tenant="acme", prompt_token_ids=follow_up, max_new_tokens=40)
    run_to_end(warm)
    assert hit.num_prefix_hit_tokens == 160
    assert hit.output_token_ids == ref.output_token_ids
