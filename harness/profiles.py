"""Run profiles: how long and how hard `kvgate run` drives the target, and with what sizes.

    quick  a smoke run for CI matrices: well under a minute on a 2-core machine
    ci     a pull-request gate: a few minutes, the full prompt sizes
    full   a pre-rollout run: five minutes of load at the scenarios' default sizes

`--duration`, `--users` and `--spawn-rate` on the command line override a profile's values;
every other knob is a LoadSettings field (docs/scenarios.md) that a profile may change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference_engine.errors import UnknownNameError


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


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile(name="quick", duration_s=12, users=10, spawn_rate=10, baseline_requests=5, cooldown_max_s=15,
            cooldown_min_s=2, stop_timeout_s=5,
            settings={"long_prompt_tokens": 16384, "long_output_tokens": 256, "batch_prompt_tokens": 1024,
                      "batch_max_tokens": 128, "cancel_prompt_tokens": 4096, "cancel_max_tokens": 256,
                      "tenant_prefix_tokens": 256, "burst_size": 8, "turns": 3, "idle_gap_min_s": 0.5,
                      "idle_gap_max_s": 2.0, "wait_min_s": 0.1, "wait_max_s": 0.5, "kill_interval_s": 4.0,
                      "step_users": 2, "step_s": 3.0, "step_max_users": 16, "step_hold_s": 3.0,
                      "request_timeout_s": 30.0}),
    Profile(name="ci", duration_s=60, users=24, spawn_rate=8, baseline_requests=10, cooldown_max_s=30,
            cooldown_min_s=5, stop_timeout_s=15,
            settings={"long_output_tokens": 1024, "burst_size": 12, "idle_gap_min_s": 1.0, "idle_gap_max_s": 4.0,
                      "kill_interval_s": 15.0, "step_users": 4, "step_s": 8.0, "step_max_users": 48,
                      "step_hold_s": 8.0, "request_timeout_s": 60.0}),
    Profile(name="full", duration_s=300, users=64, spawn_rate=8, baseline_requests=20, cooldown_max_s=60,
            cooldown_min_s=10, stop_timeout_s=30),
)}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownNameError("profile", name, PROFILES) from None
