"""The timing probe against a fake target whose time to first token is its prefix cache's: a
primed prompt answers in 20 ms, any other in 80 ms, on a clock the fake advances (no sleeping)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from gates import Outcome, get_gate, load_thresholds
from harness.collectors.timing_probe import (
    CONDITIONS,
    MAX_PROMPT_TOKENS,
    MAX_ROUNDS,
    MIN_PROMPT_TOKENS,
    MIN_ROUNDS,
    Party,
    TimingPlan,
    probe_timing,
    size_timing,
)
from harness.loadgen.tenants import Tenant
from harness.target_speed import TargetSpeed
from tests.fixtures.records import RecordBuilder

A, B = Tenant("a", "sk-a"), Tenant("b", "sk-b")
STREAM = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n'


class FakeTarget:
    """A prefix cache keyed by `scope` of (key, salt) and the prompt; every request is logged."""

    def __init__(self, scope: str) -> None:
        self.scope, self.now_s = scope, 0.0
        self.cached: set[tuple[object, str]] = set()
        self.log: list[tuple[str, str | None, str]] = []

    def clock(self) -> float:
        return self.now_s

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        prompt, salt = body["messages"][-1]["content"], body.get("cache_salt")
        key = request.headers["authorization"]
        self.log.append((key, salt, prompt))
        who = {"tenant": (key, salt), "global": None, "none": object()}[self.scope]
        hit = (who, prompt) in self.cached
        self.cached.add((who, prompt))
        self.now_s += 0.02 if hit else 0.08
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM)


def timed(scope: str, rounds: int = 12) -> tuple[dict, FakeTarget]:
    fake = FakeTarget(scope)
    pairs = {"cross_tenant": (Party(A), Party(B)), "cache_salt": (Party(A, "s1"), Party(A, "s2"))}
    plan = TimingPlan(prompt_tokens=64, rounds=rounds, seed=7, sized_from={})
    probes = probe_timing("http://fake", "m", pairs, plan, transport=httpx.MockTransport(fake.handle), clock=fake.clock)
    return probes, fake


def judge(probes: dict, tmp_path: Path):
    record = RecordBuilder().healthy().meta(probes=probes).build(tmp_path / "run")
    return get_gate("prefix_timing").evaluate(record, load_thresholds().for_gate("prefix_timing"))


def test_every_condition_is_timed_after_a_prime_by_the_same_party() -> None:
    probes, fake = timed("tenant")
    for kind in ("cross_tenant", "cache_salt"):
        assert {c: len(v) for c, v in probes[f"timing_{kind}"]["ttft_s"].items()} == dict.fromkeys(CONDITIONS, 12)
    primes = fake.log[0::2]
    assert all(key == "Bearer sk-a" for key, _, _ in primes)  # A primes every timed request
    assert len({prompt for _, _, prompt in fake.log}) == len(fake.log) * 3 // 4  # cold prompts are fresh


def test_the_conditions_of_a_round_come_in_a_shuffled_order() -> None:
    probes, fake = timed("tenant")
    warm = [fake.log[i][2] == fake.log[i - 1][2] for i in range(1, len(fake.log), 2)]
    first_round, second_round = warm[:8], warm[8:16]
    assert sorted(first_round) == sorted(second_round) and first_round != second_round


@pytest.mark.parametrize(
    ("scope", "outcome"),
    [("tenant", Outcome.PASS), ("global", Outcome.FAIL), ("none", Outcome.NOT_MEASURABLE)],
)
def test_a_scoped_cache_passes_a_shared_one_fails_and_none_cannot_be_told(scope, outcome, tmp_path) -> None:
    probes, _ = timed(scope)
    result = judge(probes, tmp_path)
    assert result.outcome is outcome, result.explanation


def test_unsalted_sharing_fails_the_tenant_pair_and_passes_the_salt_pair(tmp_path) -> None:
    """vLLM's rule: unsalted blocks shared by every caller, a salt isolates."""
    fake = FakeTarget("global")
    vllm_like = fake.handle

    def handle(request: httpx.Request) -> httpx.Response:
        fake.scope = "tenant" if json.loads(request.content).get("cache_salt") else "global"
        return vllm_like(request)

    pairs = {"cross_tenant": (Party(A), Party(B)), "cache_salt": (Party(A, "s1"), Party(A, "s2"))}
    plan = TimingPlan(prompt_tokens=64, rounds=12, seed=3, sized_from={})
    probes = probe_timing("http://f", "m", pairs, plan, transport=httpx.MockTransport(handle), clock=fake.clock)
    result = judge(probes, tmp_path)
    assert {m.metric: m.ok for m in result.measurements} == {"max_other_tenant_auc": False, "max_other_salt_auc": True}


def test_a_target_that_refuses_the_probe_is_not_sent(tmp_path) -> None:
    refuse = httpx.MockTransport(lambda r: httpx.Response(429, json={"error": {"code": "tenant_quota"}}))
    plan = TimingPlan(prompt_tokens=64, rounds=4, seed=1, sized_from={})
    probes = probe_timing("http://f", "m", {"cross_tenant": (Party(A), Party(B))}, plan, transport=refuse)
    assert not probes["timing_cross_tenant"]["sent"] and "not served" in probes["timing_cross_tenant"]["detail"]
    assert judge(probes, tmp_path).outcome is Outcome.NOT_MEASURABLE


def speed(first_token_s: float, prefill_tokens_per_s: float, max_model_len: int | None = None) -> TargetSpeed:
    return TargetSpeed(
        first_token_s=first_token_s,
        prefill_s_per_token=1 / prefill_tokens_per_s,
        decode_s_per_token=0.01,
        max_model_len=max_model_len,
    )


def test_the_prompt_is_sized_for_a_cold_prefill_well_above_the_fixed_cost() -> None:
    assert size_timing(speed(0.02, 10_000), 1).prompt_tokens == 600  # 3 × 20 ms of prefill
    assert size_timing(speed(0.001, 100_000), 1).prompt_tokens == 3000  # at least 30 ms of it
    assert size_timing(speed(0.05, 1_000), 1).prompt_tokens == MIN_PROMPT_TOKENS
    assert size_timing(speed(0.02, 1e6), 1).prompt_tokens == MAX_PROMPT_TOKENS
    assert size_timing(speed(0.02, 1e6, max_model_len=4096), 1).prompt_tokens == 2048


def test_the_rounds_fit_the_budget_within_their_bounds() -> None:
    fast, slow = speed(0.001, 1e6), speed(0.5, 500)
    assert size_timing(fast, 1, budget_s=1e6).rounds == MAX_ROUNDS
    assert size_timing(slow, 2, budget_s=1.0).rounds == MIN_ROUNDS
    middle = size_timing(speed(0.01, 50_000), 1, budget_s=12.0)  # 0.4 s a round
    assert MIN_ROUNDS < middle.rounds < MAX_ROUNDS
