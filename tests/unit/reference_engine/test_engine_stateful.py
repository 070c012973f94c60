"""Hypothesis state machine over random add / step / cancel / time sequences.

Invariants after every rule: refcounts ≥ 0 and live + cached + free = total (the pool's own
self-check); no request references a block of another tenant unless it is public; every tenant's
live blocks stay under its hard cap while admission is on; usage never exceeds capacity. At the
end, once everything has finished or been cancelled and sessions expired, nothing is live.
"""

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference_engine import RequestError
from reference_engine.config import PolicyName
from tests.helpers import Driver, small_config

PUBLIC = " ".join(["shared"] * 48)
PREFIXES = [[900_000 + i for i in range(64)], [910_000 + i for i in range(40)]]


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.policy = None
        self.d: Driver | None = None

    @precondition(lambda self: self.d is None)
    @rule(policy=st.sampled_from([p.value for p in PolicyName]), mode=st.sampled_from(["auto", "recompute", "swap"]))
    def start(self, policy: str, mode: str) -> None:
        self.policy = policy
        self.d = Driver(
            small_config(
                256,
                overrides={
                    "kv_cache.policy": policy,
                    "preemption.mode": mode,
                    "engine.max_num_batched_tokens": 64,
                    # token-level policies compress sequences of these lengths; multi_queue ticks often
                    "streamingllm.sliding_window_tokens": 96,
                    "h2o.min_tokens_to_compress": 128,
                    "h2o.recent_window_tokens": 32,
                    "multi_queue.tick_interval_ms": 20,
                    "multi_queue.promotion_window_ms": 500,
                    "multi_queue.long_session_tokens": 200,
                    "engine.max_num_seqs": 6,
                    "kv_cache.max_session_idle_seconds": 3.0,
                    "prefix_cache.public_prefixes": [{"name": "p", "text": PUBLIC}],
                    "kv_cache.guard": {
                        "warn_at_percent": 50,
                        "admission_at_percent": 60,
                        "evict_at_percent": 70,
                        "pause_batch_prefill_at_percent": 80,
                        "preempt_at_percent": 88,
                        "reject_at_percent": 96,
                    },
                },
            )
        )
        self.public = self.d.core.tokenizer.encode(PUBLIC)
        self.ids = 0

    @precondition(lambda self: self.d is not None)
    @rule(
        tenant=st.sampled_from(["acme", "globex", "batchco", "ops"]),
        prompt=st.integers(1, 700),
        max_new=st.integers(1, 120),
        prefix=st.sampled_from([None, 0, 1, "public"]),
        session=st.sampled_from([None, "s1", "s2"]),
    )
    def add(self, tenant, prompt, max_new, prefix, session) -> None:
        self.ids += 1
        head = self.public if prefix == "public" else (PREFIXES[prefix] if prefix is not None else [])
        ids = head + [1_000_000 * self.ids + i for i in range(prompt)]
        try:
            self.d.core.add_request(tenant=tenant, prompt_token_ids=ids, max_new_tokens=max_new, session_id=session)
        except RequestError:
            pass

    @precondition(lambda self: self.d is not None)
    @rule(n=st.integers(1, 8))
    def step(self, n: int) -> None:
        for _ in range(n):
            self.d.step()

    @precondition(lambda self: self.d is not None)
    @rule(pick=st.integers(0, 1000))
    def cancel(self, pick: int) -> None:
        reqs = list(self.d.core.scheduler.requests)
        if reqs:
            rid = reqs[pick % len(reqs)]
            self.d.core.abort(rid)
            assert rid not in self.d.core.scheduler.requests

    @precondition(lambda self: self.d is not None)
    @rule(seconds=st.floats(0.01, 4.0))
    def wait(self, seconds: float) -> None:
        self.d.clock.advance(seconds)

    @invariant()
    def pool_consistent(self) -> None:
        if self.d is None:
            return
        core = self.d.core
        core.pool.check_invariants()
        assert core.pool.num_live <= core.pool.num_blocks
        for r in core.scheduler.requests.values():
            for b in r.block_ids:
                assert core.pool.block_tenant(b) in (r.tenant, None), "a private block crossed tenants"
        if core.admission.enabled and core.admission.tenant_caps:
            for t in core.tenants:
                assert core.pool.live_by_tenant.get(t.name, 0) <= t.max_blocks

    def teardown(self) -> None:
        if self.d is None:
            return
        core = self.d.core
        self.d.run()
        assert not core.has_work()
        self.d.clock.advance(10)
        core.step()  # expire idle sessions
        assert core.pool.num_live == 0, "something still holds KV after everything ended"
        core.pool.check_invariants()


TestEngineStateful = EngineMachine.TestCase
TestEngineStateful.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
