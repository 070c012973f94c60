"""The prefix cache's timing side channel, probed: can another party tell a cached prompt by its TTFT?

    plan = size_timing(speed, num_kinds=2)
    samples = probe_timing(base_url, model, pairs, plan, tokens)     # meta.probes["timing_<kind>"]

A target that reports no `cached_tokens` (a gateway strips usage, llama.cpp) still tells a
client that a prompt was cached: its first token comes sooner. So the probe measures what an
attacker would: for each pair of parties (`cross_tenant`: tenant A and tenant B; `cache_salt`:
one key, salts A and B) four conditions, each a prime sent by A and then one timed request:

    same_warm    A primes prompt P, A sends P            a hit: the cache and the clock work
    same_cold    A primes prompt P, A sends a fresh Q    never seen: recomputed
    other_warm   A primes prompt P, B sends P            a hit only if the cache leaks across
    other_cold   A primes prompt P, B sends a fresh Q

Cold and warm differ only in what the cache holds: each timed request follows a prime of the
same length by the same sender, and the conditions of a round run in a seeded random order, so
drift of the machine (a busy neighbour, a warming CPU) falls on every condition alike instead of
looking like a cache. Every prompt starts with an id of its own, so its blocks are new to the
target. The gate (gates/checks/prefix_timing.py) judges the TTFTs: the same party's warm
requests must be told from its cold ones (else nothing can be told: not measurable), another
party's must not.

The prompt and the number of rounds are sized to the target's measured speed
(harness/target_speed.py): the cold prefill takes `PREFILL_OVER_FIXED` times the target's fixed
cost to a first token (the noise of a TTFT grows with that), at least `MIN_PREFILL_S`; the
rounds fit `budget_s`, within [`MIN_ROUNDS`, `MAX_ROUNDS`].
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import httpx

from harness.loadgen.exchange import Call, run_exchange
from harness.loadgen.httpx_transport import HttpxTransport
from harness.loadgen.outcome import Status
from harness.loadgen.prompts import REFERENCE_TOKENS, TokenModel, chat_prompt
from harness.loadgen.tenants import Tenant
from harness.target_speed import TargetSpeed

CONDITIONS = ("same_warm", "same_cold", "other_warm", "other_cold")
MIN_PREFILL_S = 0.03
PREFILL_OVER_FIXED = 3.0
MIN_PROMPT_TOKENS = 256  # two blocks at the largest block size in use (128 on vLLM's CPU backend)
MAX_PROMPT_TOKENS = 8192
MIN_ROUNDS = 24  # samples per condition: a leak-free pair's AUC passes 0.75 about once in 600 runs
MAX_ROUNDS = 48
BUDGET_S = 30.0
MAX_FAILED_FRACTION = 0.1
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Party:
    """Who sends a probe request: a tenant (its key) and the cache_salt it sends, if any."""

    tenant: Tenant
    salt: str | None = None


@dataclass(frozen=True)
class TimingPlan:
    """How long each probe prompt is and how many rounds of the four conditions run."""

    prompt_tokens: int
    rounds: int
    seed: int
    sized_from: dict[str, float]
    """The target's speed the plan was sized from (first token, prefill per token)."""


def size_timing(speed: TargetSpeed, num_kinds: int, budget_s: float = BUDGET_S, seed: int | None = None) -> TimingPlan:
    """A prompt whose cold prefill stands out of the target's fixed cost, and as many rounds of
    `num_kinds` pairs' four conditions as fit `budget_s` (module docstring)."""
    prefill_s = max(MIN_PREFILL_S, PREFILL_OVER_FIXED * speed.first_token_s)
    longest = min(MAX_PROMPT_TOKENS, speed.max_model_len // 2) if speed.max_model_len else MAX_PROMPT_TOKENS
    tokens = round(min(max(speed.prefilled_in(prefill_s), MIN_PROMPT_TOKENS), max(longest, MIN_PROMPT_TOKENS)))
    round_s = 2 * len(CONDITIONS) * max(num_kinds, 1) * speed.request_s(tokens, 1)  # a prime and a timed request
    rounds = int(min(max(budget_s / round_s, MIN_ROUNDS), MAX_ROUNDS))
    return TimingPlan(
        prompt_tokens=tokens,
        rounds=rounds,
        seed=secrets.randbits(32) if seed is None else seed,
        sized_from={"first_token_s": speed.first_token_s, "prefill_s_per_token": speed.prefill_s_per_token},
    )


def probe_timing(
    base_url: str,
    model: str,
    pairs: Mapping[str, tuple[Party, Party]],
    plan: TimingPlan,
    tokens: TokenModel = REFERENCE_TOKENS,
    *,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, dict[str, object]]:
    """The TTFTs of every condition of every pair (`kind` -> (same party, other party)), as
    meta.probes keeps them under `timing_<kind>`: seconds per condition, failures, the plan.
    `transport` and `clock`: test seams."""
    rng = random.Random(plan.seed)
    run = secrets.token_hex(4)
    ttfts: dict[str, dict[str, list[float]]] = {kind: {c: [] for c in CONDITIONS} for kind in pairs}
    failed = dict.fromkeys(pairs, 0)
    with httpx.Client(timeout=TIMEOUT_S, transport=transport) as client:
        send = _sender(HttpxTransport(client, base_url), model, tokens, plan.prompt_tokens, clock)
        n = 0
        for _i in range(plan.rounds):
            order = [(kind, c) for kind in pairs for c in CONDITIONS]
            rng.shuffle(order)
            for kind, condition in order:
                same, other = pairs[kind]
                primed, fresh = f"{run}-{n}", f"{run}-{n}-fresh"
                n += 1
                send(same, primed)
                timed = send(
                    same if condition.startswith("same") else other,
                    primed if condition.endswith("warm") else fresh,
                )
                if timed is None:
                    failed[kind] += 1
                else:
                    ttfts[kind][condition].append(round(timed, 6))
    out: dict[str, dict[str, object]] = {}
    for kind in pairs:
        total = plan.rounds * len(CONDITIONS)
        too_many = failed[kind] > MAX_FAILED_FRACTION * total
        out[f"timing_{kind}"] = {
            "sent": not too_many,
            "detail": (
                f"{failed[kind]} of {total} timed requests were not served: the target cannot be timed"
                if too_many
                else f"{plan.rounds} rounds of {len(CONDITIONS)} conditions, prompts of {plan.prompt_tokens} tokens"
            ),
            "num_failed": failed[kind],
            **asdict(plan),
            "ttft_s": ttfts[kind],
        }
    return out


Send = Callable[[Party, str], float | None]


def _sender(
    transport: HttpxTransport, model: str, tokens: TokenModel, num_tokens: int, clock: Callable[[], float]
) -> Send:
    """One streamed request of a prompt that starts with `prompt_id`: its TTFT, None if not served."""

    def send(party: Party, prompt_id: str) -> float | None:
        call = Call(
            request_id=f"timing-{prompt_id}",
            scenario="isolation",
            phase="preflight",
            tenant=party.tenant,
            model=model,
            prompt=chat_prompt(num_tokens, seed=prompt_id, prefix=f"probe {prompt_id}:", tokens=tokens),
            max_tokens=1,
            cache_salt=party.salt,
        )
        outcome = run_exchange(transport, call, timeout_s=TIMEOUT_S, on_done=lambda o: None, clock=clock).outcome
        return outcome.ttft_s if outcome.status == Status.OK.value else None

    return send
