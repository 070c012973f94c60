"""Run profiles: how long and how hard `kvgate run` drives the target, and with what sizes.

    quick  a pressure run for CI matrices: under a minute on a 2-core machine, every rung to preempt
    ci     a pull-request gate: the same pressure held three times as long
    full   a pre-rollout soak: five minutes of load at the scenarios' default sizes

`--duration`, `--users` and `--spawn-rate` on the command line override a profile's values;
every other knob is a LoadSettings field (docs/scenarios.md) that a profile may change.

`engine_overrides` resize the *simulated* GPU for the profile's load. A short run on a 2-core
machine cannot fill the default 52.7 GiB pool (26,995 blocks: a quick run peaked at 5 % of it),
and a gate that never sees pressure cannot tell a good policy from a bad one. So quick and ci
shrink the KV pool (`hardware.kv_pool_gib`) until their load crosses the watermark ladder up to
the preempt rung (docs/scenarios.md), and lower `engine.max_num_seqs` with it, because
consecutive watermarks must stay one scheduler step of growth apart (Watermarks.check_headroom)
and a small pool leaves 3 % of it between rungs; they shrink the host memory for swapped KV too
(`preemption.host_swap_gib`), so that swap space runs out and recompute is chosen as well, as on
a real host. Only such resource sizes may be overridden (`RESOURCE_KEYS`): what is gated is the
policy as written. Overrides apply only to an engine the harness starts, never to an external
--target.

On an external --target the profile's load is instead sized to the target's measured speed
(harness/load_sizing.py): smaller prompts and answers, fewer users, a longer load, until its
requests finish within the run. The engine the harness starts keeps these values as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from record.errors import UnknownNameError

RESOURCE_KEYS = frozenset({"hardware.kv_pool_gib", "engine.max_num_seqs", "preemption.host_swap_gib"})
"""The config keys a profile may resize: the simulated machine, never the policy."""


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    duration_s: float
    users: int
    spawn_rate: float
    baseline_requests: int
    cooldown_max_s: float
    cooldown_min_s: float
    stop_timeout_s: float
    settings: dict[str, Any] = field(default_factory=dict)
    """LoadSettings fields this profile changes."""
    engine_overrides: dict[str, Any] = field(default_factory=dict)
    """Dotted config keys (`reference_engine.with_overrides`) set on an engine the harness starts."""

    def __post_init__(self) -> None:
        policy_keys = sorted(set(self.engine_overrides) - RESOURCE_KEYS)
        assert not policy_keys, f"profile {self.name} overrides policy keys {policy_keys}"


# The simulated machine and the load of a pressure run (quick and ci), read with the module
# docstring. 7 GiB = 3,584 blocks; a tenant's cap (15 %) of 537 blocks holds one 7K-token prompt
# with its answer. max_num_seqs 40: rungs 3 % (107 blocks) apart hold one step of growth (64 + 40).
# 0.5 GiB of host swap space holds about 4K tokens: swap runs out, and recompute is chosen too.
# The mix: idle conversations outgrow the pool (evict rung); long answers about long contexts and
# batch jobs grow past what admission planned when they started (preempt rung).
PRESSURE_MACHINE: dict[str, Any] = {
    "hardware.kv_pool_gib": 7,
    "engine.max_num_seqs": 40,
    "preemption.host_swap_gib": 0.5,
}
PRESSURE_LOAD: dict[str, Any] = {
    "long_prompt_tokens": 7000,
    "long_output_tokens": 1024,
    "long_output_prompt_tokens": 1100,
    "batch_prompt_tokens": 2048,
    "batch_max_tokens": 1024,
    "cancel_prompt_tokens": 4096,
    "cancel_max_tokens": 256,
    "document_tokens": 512,
    "session_context_tokens": 1500,
    "long_session_context_tokens": 5000,
    "burst_size": 8,
    "turns": 3,
    "idle_gap_min_s": 1.0,
    "idle_gap_max_s": 3.0,
    "wait_min_s": 0.1,
    "wait_max_s": 0.5,
    "kill_interval_s": 4.0,
    "router_chaos_interval_s": 2.0,  # a fleet config's prefix index: a chaos step every 2 s (others: off)
    "pd_chaos_interval_s": 2.0,  # a P/D config's link: a chaos step every 2 s (others: off)
    "step_users": 2,
    "step_s": 3.0,
    "step_max_users": 16,
    "step_hold_s": 3.0,
    "request_timeout_s": 40.0,
    "mix": "multi_turn=8,long_output=20,shared_prefix=3,long_prompt=2,batch_mix=6,cancel_storm=2",
}

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="quick",
            duration_s=16,
            users=54,
            spawn_rate=16,
            baseline_requests=30,
            cooldown_max_s=15,
            cooldown_min_s=2,
            stop_timeout_s=12,
            engine_overrides=PRESSURE_MACHINE,
            settings=PRESSURE_LOAD,
        ),
        # ci: the same pressure held three times as long, with room for slower worker kills and steps
        Profile(
            name="ci",
            duration_s=45,
            users=54,
            spawn_rate=8,
            baseline_requests=30,
            cooldown_max_s=30,
            cooldown_min_s=5,
            stop_timeout_s=15,
            engine_overrides=PRESSURE_MACHINE,
            settings={
                **PRESSURE_LOAD,
                "kill_interval_s": 15.0,
                "router_chaos_interval_s": 5.0,
                "pd_chaos_interval_s": 5.0,
                "step_users": 4,
                "step_s": 8.0,
                "step_max_users": 48,
                "step_hold_s": 8.0,
                "request_timeout_s": 60.0,
            },
        ),
        # full: five minutes at the scenarios' default sizes on the config's own pool, for a target
        # sized like production (a real GPU server); two cores' worth of load does not fill a
        # simulated H100's 52.7 GiB, so on the reference engine it is a soak, not a pressure run.
        Profile(
            name="full",
            duration_s=300,
            users=64,
            spawn_rate=8,
            baseline_requests=30,
            cooldown_max_s=60,
            cooldown_min_s=10,
            stop_timeout_s=30,
        ),
    )
}


def format_overrides(overrides: Mapping[str, Any]) -> str:
    """`hardware.kv_pool_gib = 6, engine.max_num_seqs = 32`: how a run says what it changed."""
    return ", ".join(f"{key} = {value}" for key, value in overrides.items())


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownNameError("profile", name, PROFILES) from None


def request_timeout(wanted_s: float, duration_s: float, stop_timeout_s: float) -> float:
    """The request timeout a run uses: never longer than the load plus locust's stop timeout, the
    most a request sent as the load begins can run for. A longer one could never fire: a request
    that hangs would only be cut when the run stops (recorded `unfinished`), never counted as
    the timeout it is."""
    return min(wanted_s, duration_s + stop_timeout_s)
