"""Shared test helpers: small engine configs and a virtual-clock driver (import as tests.helpers)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from reference_engine import EngineConfig, EngineCore, VirtualClock, with_overrides
from reference_engine.memory import GIB
from reference_engine.request import Request

# 16-token blocks of Llama-3.1-8B bf16 KV are 2 MiB: 1024 blocks = 2 GiB.
BLOCK_BYTES = 16 * 131072

TENANTS = {
    "acme": {"api_keys": ["sk-acme"], "traffic_class": "interactive"},
    "globex": {"api_keys": ["sk-globex"], "traffic_class": "interactive"},
    "batchco": {"api_keys": ["sk-batch"], "traffic_class": "batch"},
    "ops": {"api_keys": ["sk-ops"], "traffic_class": "system"},
}


def small_config(num_blocks: int = 1024, overrides: Mapping[str, Any] | None = None, **kw: Any) -> EngineConfig:
    """A Llama-3.1-8B/H100 engine with a pool of exactly `num_blocks` blocks and small step budgets."""
    base = {
        "hardware.kv_pool_gib": num_blocks * BLOCK_BYTES / GIB,
        "engine.max_num_seqs": 8,
        "engine.max_num_batched_tokens": 256,
        "tenants": {name: dict(t) for name, t in TENANTS.items()},
        "admission.max_new_tokens_default": 64,
    }
    base.update(overrides or {})
    base.update({k.replace("__", "."): v for k, v in kw.items()})
    return with_overrides(EngineConfig(), base)


class Driver:
    """Runs an EngineCore on a virtual clock, like replay does."""

    def __init__(self, config: EngineConfig) -> None:
        self.clock = VirtualClock()
        self.core = EngineCore(config, clock=self.clock)
        self._n = 0

    def step(self, until_s: float | None = None):
        out = self.core.step(until_s)
        if out.idle and self.core.has_work():
            timer = self.core.next_timer_s()
            if timer is None:
                raise AssertionError("deadlock: work is waiting but nothing can ever change")
            self.clock.advance_to(timer)
        self.clock.advance_to(out.t_end_s)
        return out

    def run(self, max_steps: int = 100_000, fast: bool = False) -> int:
        steps = 0
        while self.core.has_work() and steps < max_steps:
            self.step(float("inf") if fast else None)
            steps += 1
        return steps

    def add(self, tenant: str = "acme", prompt_len: int = 100, max_new: int = 16, **kw: Any):
        """Add a request; without explicit `prompt_token_ids` every prompt is unique (no prefix hits)."""
        self._n += 1
        ids = kw.pop("prompt_token_ids", None) or [10_000 + self._n * 100_003 + i for i in range(prompt_len)]
        return self.core.add_request(tenant=tenant, prompt_token_ids=ids, max_new_tokens=max_new, **kw)


def steps_of(d: Driver, r: Any) -> Iterator[tuple[int, bool]]:
    """Step `d` until `r` finishes: after each step, the tokens `r` has seen and whether that
    step dropped some of its KV (a token-level policy compacted it)."""
    while d.core.has_work():
        dropped = r.num_dropped_tokens
        d.step()
        if r.is_finished:
            return
        yield r.num_computed_tokens, r.num_dropped_tokens > dropped


def access(index: Any, key: Any, now_s: float, meta: Any = None) -> None:
    """An access to an indexed entry, as the engine makes it: the entry becomes live again
    (`remove`: a prefix hit, a session's next turn) and is released back (`insert`)."""
    from reference_engine.policies.base import EntryMeta

    index.remove(key, now_s)
    index.insert([key], meta if meta is not None else EntryMeta(), now_s)


def tiered_driver(**tiers: Any) -> Driver:
    """A 1,024-block pool with KV tiers (`tiers.<key>` = value) whose tenant acme may use all of
    it (so the tiers' tenant caps never bind), and write-back with a generous backlog."""
    tenants = {name: dict(t) for name, t in TENANTS.items()}
    tenants["acme"]["max_kv_share"] = 1.0
    overrides = {f"tiers.{k}": v for k, v in {"max_write_backlog_ms": 1000, **tiers}.items()}
    return Driver(small_config(1024, {"tenants": tenants, **overrides}))


def distinct_prompts(n: int, num_tokens: int = 1500) -> list[list[int]]:
    """`n` seeded random prompts; 1,500 tokens are 94 blocks: ten overflow a 1,024-block pool."""
    rng = random.Random(0)
    return [[rng.randrange(100, 1000) for _ in range(num_tokens)] for _ in range(n)]


def serve_rounds(d: Driver, prompts: list[list[int]], rounds: int = 2) -> list[Request]:
    """Serve each prompt (one token added per round, so only its blocks repeat) as acme, one
    after another, for `rounds` rounds: a cyclic reuse an LRU pool smaller than it never hits."""
    out = []
    for rnd in range(rounds):
        for p in prompts:
            out.append(d.core.add_request(tenant="acme", prompt_token_ids=[*p, rnd], max_new_tokens=4))
            d.run()
    return out
