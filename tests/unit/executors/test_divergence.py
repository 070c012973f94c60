"""Divergence of approximate decoding from exact decoding, measured on the torch executor."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("torch")

from reference_engine.divergence import measure_policy_divergence  # noqa: E402
from reference_engine.policies import registry  # noqa: E402
from reference_engine.policies.base import LruIndex  # noqa: E402
from reference_engine.policies.policy import Policy  # noqa: E402
from tests.torch_helpers import torch_config  # noqa: E402

pytestmark = pytest.mark.torch


class SinkAndWindow:
    """A stand-in token-level compressor: keep the first block and the last `window` blocks."""

    def __init__(self, window_blocks: int, block_tokens: int = 16) -> None:
        self.window_blocks = window_blocks
        self.block_tokens = block_tokens

    def plan_keep(self, r, attention, protected_tokens, num_steps=1):
        bt, n = self.block_tokens, r.num_kv_tokens
        excess = n // bt - 1 - self.window_blocks
        return np.concatenate((np.arange(bt), np.arange((1 + excess) * bt, n))) if excess > 0 else None

    def forget(self, request_id: str) -> None:
        pass


def prompts(n: int, length: int) -> list[list[int]]:
    rng = random.Random(11)
    return [[rng.randrange(5, 4096) for _ in range(length)] for _ in range(n)]


def test_exact_policy_measures_full_agreement_and_no_divergence():
    d = measure_policy_divergence(torch_config(64), prompts(2, 120), max_new_tokens=24)
    assert (d.num_requests, d.num_tokens) == (2, 48)
    assert d.token_agreement == 1.0 and d.max_kl < 1e-4  # float rounding only (≈ 4e-7 on CPU)


def test_an_approximate_policy_produces_a_measured_nonzero_divergence(monkeypatch):
    def factory(config, num_blocks):
        return Policy("streamingllm", lambda tier: LruIndex(), compressor=SinkAndWindow(window_blocks=2))

    monkeypatch.setitem(registry.POLICIES, "streamingllm", factory)
    d = measure_policy_divergence(torch_config(64, kv_cache__policy="streamingllm"), prompts(2, 120), max_new_tokens=24)
    assert d.num_tokens == 48
    assert d.mean_kl > 1e-3 and d.max_kl >= d.mean_kl
    assert 0.0 <= d.token_agreement < 1.0
    assert set(d.as_dict()) == {"num_requests", "num_tokens", "token_agreement", "mean_kl", "max_kl"}


@pytest.mark.parametrize("policy", ["streamingllm", "h2o"])
def test_the_registered_approximate_policies_diverge_measurably(policy):
    if policy not in registry.POLICIES:
        pytest.skip(f"policy {policy!r} is not registered yet")
    overrides = {
        "streamingllm": {"streamingllm__sink_tokens": 4, "streamingllm__sliding_window_tokens": 32},
        "h2o": {"h2o__recent_window_tokens": 32, "h2o__min_tokens_to_compress": 64},
    }[policy]
    d = measure_policy_divergence(
        torch_config(64, kv_cache__policy=policy, **overrides), prompts(2, 160), max_new_tokens=24
    )
    assert d.num_tokens == 48 and d.mean_kl > 0
