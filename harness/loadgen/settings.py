"""Every knob of the scenarios, in one table: locust options `--kvgate-*` and env `KVGATE_*`.

`LoadSettings` is the one place the scenarios read settings from. Each field is a locust
command-line option (`--kvgate-prompt-tokens 64`, shown in the web UI) and an environment
variable (`KVGATE_PROMPT_TOKENS=64`); the command line wins over the environment, which wins
over the default below. `kvgate run` hands its settings to the locust process through the
environment (`to_env`), so keys and long prompts stay off the command line. docs/scenarios.md
lists them all; `OPTIONS` is the source of that list.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from harness.loadgen.arrivals import ArrivalKind, arrival_kind
from harness.loadgen.client_lag import MAX_LAG_P99_MS
from harness.loadgen.prompts import DEFAULT_SYSTEM_PROMPT, TokenModel
from harness.loadgen.tenants import DEFAULT_SPEC, parse_tenants
from record.errors import UnknownNameError
from reference_engine.config import DEV_ADMIN_KEY


class SettingsError(ValueError):
    """A setting out of range; the message names the option."""


@dataclass(frozen=True, kw_only=True)
class LoadSettings:
    model: str = ""
    tenants: str = DEFAULT_SPEC
    admin_key: str = DEV_ADMIN_KEY
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    prompt_tokens: int = 64
    max_tokens: int = 64
    long_prompt_tokens: int = 32768
    long_output_tokens: int = 2048
    long_output_prompt_tokens: int = 1024
    document_tokens: int = 512
    num_documents: int = 8
    document_popularity: float = 1.0
    batch_prompt_tokens: int = 2048
    batch_max_tokens: int = 512
    cancel_prompt_tokens: int = 4096
    cancel_max_tokens: int = 1024
    cancel_prefill_ms: float = 30.0
    cancel_decode_words: int = 8
    burst_size: int = 16
    burst_tenant: str = ""
    turns: int = 4
    session_context_tokens: int = 1024
    long_session_fraction: float = 0.2
    long_session_context_tokens: int = 4096
    idle_gap_min_s: float = 1.0
    idle_gap_max_s: float = 5.0
    unrebuildable_fraction: float = 0.5
    wait_min_s: float = 0.1
    wait_max_s: float = 1.0
    kill_interval_s: float = 10.0
    tier_chaos_interval_s: float = 0.0
    tier_chaos_slowdown: float = 10.0
    tier_chaos_failure_rate: float = 0.25
    router_chaos_interval_s: float = 0.0
    pd_chaos_interval_s: float = 0.0
    step_users: int = 4
    step_s: float = 10.0
    step_max_users: int = 64
    step_hold_s: float = 10.0
    request_timeout_s: float = 120.0
    rate: float = 0.0
    arrivals: str = ArrivalKind.POISSON.value
    arrival_burst_size: int = 8
    arrival_seed: int = 0
    trace: str = ""
    trace_format: str = "auto"
    rate_scale: float = 1.0
    time_scale: float = 1.0
    size_scale: float = 1.0
    max_requests: int = 0
    schedule_s: float = 0.0
    max_in_flight: int = 256
    max_lag_ms: float = MAX_LAG_P99_MS
    load_json: str = ""
    token_model: str = ""
    mix: str = ""
    requests_csv: str = ""
    record_dir: str = ""
    phase: str = "load"
    t0_unix: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and value < 0:
                raise SettingsError(f"{option(f.name)} must not be negative, got {value}")
        for name in (
            "prompt_tokens",
            "max_tokens",
            "long_prompt_tokens",
            "long_output_tokens",
            "long_output_prompt_tokens",
            "batch_prompt_tokens",
            "batch_max_tokens",
            "cancel_prompt_tokens",
            "cancel_max_tokens",
            "cancel_decode_words",
            "burst_size",
            "turns",
            "step_users",
            "step_max_users",
            "num_documents",
            "arrival_burst_size",
            "max_in_flight",
        ):
            if getattr(self, name) < 1:
                raise SettingsError(f"{option(name)} must be at least 1, got {getattr(self, name)}")
        for lo, hi in (("idle_gap_min_s", "idle_gap_max_s"), ("wait_min_s", "wait_max_s")):
            if getattr(self, lo) > getattr(self, hi):
                raise SettingsError(f"{option(lo)} ({getattr(self, lo)}) is above {option(hi)} ({getattr(self, hi)})")
        for name in ("unrebuildable_fraction", "long_session_fraction", "tier_chaos_failure_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise SettingsError(f"{option(name)} is a fraction in [0, 1]")
        parse_mix(self.mix)
        if self.tier_chaos_slowdown < 1:
            raise SettingsError(f"{option('tier_chaos_slowdown')} divides a read bandwidth: at least 1")
        if self.step_s <= 0 or self.request_timeout_s <= 0:
            raise SettingsError(f"{option('step_s')} and {option('request_timeout_s')} must be positive")
        for name in ("rate_scale", "time_scale", "size_scale", "max_lag_ms"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{option(name)} must be positive, got {getattr(self, name)}")
        try:
            arrival_kind(self.arrivals)
        except UnknownNameError as err:
            raise SettingsError(f"{option('arrivals')}: {err}") from None
        parse_tenants(self.tenants)  # raises TenantSpecError (a ValueError) with the expected form
        try:
            TokenModel.parse(self.token_model)
        except ValueError as err:
            raise SettingsError(f"{option('token_model')}: {err}") from None

    @property
    def tokens(self) -> TokenModel:
        """What a prompt costs on the target (`token_model`): the scenarios size prompts with it."""
        return TokenModel.parse(self.token_model)

    @classmethod
    def from_options(cls, options: argparse.Namespace | None) -> LoadSettings:
        """Settings from locust's parsed options (None: the defaults, e.g. a bare Environment)."""
        if options is None:
            return cls()
        return cls(
            **{
                f.name: getattr(options, dest(f.name))
                for f in fields(cls)
                if getattr(options, dest(f.name), None) is not None
            }
        )

    def with_env(self, environ: Mapping[str, str]) -> LoadSettings:
        """These settings with every KVGATE_* variable of `environ` applied (what `kvgate run` reads)."""
        changes = {}
        for f in fields(self):
            raw = environ.get(env_var(f.name))
            if raw is not None:
                kind: type = type(f.default)  # every field has a default, of the type it parses to
                try:
                    changes[f.name] = kind(raw)
                except ValueError:
                    raise SettingsError(f"{env_var(f.name)}={raw!r} is not a {kind.__name__}") from None
        return replace(self, **changes)

    def with_(self, **changes: Any) -> LoadSettings:
        return replace(self, **changes)

    def public(self) -> dict[str, Any]:
        """These settings as a record may keep them: no keys, the tenants by name only."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SECRETS}
        out["tenants"] = [t.name for t in parse_tenants(self.tenants)]
        return out

    def to_env(self) -> dict[str, str]:
        """Environment variables that reproduce these settings in a locust process."""
        return {env_var(f.name): str(getattr(self, f.name)) for f in fields(self)}


OPTIONS: dict[str, str] = {
    "model": "model name sent in every request (default: the first model of GET /v1/models)",
    "tenants": "tenants as name=key[:class],... (class interactive|batch|system; default: configs/default.toml's)",
    "admin_key": "admin key of the reference engine's /admin API (worker kill, tier chaos); other targets ignore it",
    "system_prompt": (
        "shared system prompt: the engine's public prefix text, word for word, so prefixes really are shared"
    ),
    "prompt_tokens": "prompt tokens of short Q&A, shared-prefix questions, bursts and multi-turn user turns",
    "max_tokens": "max_tokens of short answers",
    "long_prompt_tokens": "prompt tokens of the long-prompt scenario (needs a long-context model)",
    "long_output_tokens": "max_tokens of the long-output scenario",
    "long_output_prompt_tokens": "prompt tokens of the long-output scenario (the context the long answer is about)",
    "document_tokens": "words of a tenant's typical shared document (shared_prefix: lengths vary around it)",
    "num_documents": "shared documents per tenant (shared_prefix), from 1/4 to 2x document_tokens long",
    "document_popularity": "Zipf exponent of which document a question is about (0: all alike; 1: the first "
    "is asked about twice as often as the second)",
    "batch_prompt_tokens": "prompt tokens of batch requests (batch_mix)",
    "batch_max_tokens": "max_tokens of batch requests (batch_mix)",
    "cancel_prompt_tokens": "prompt tokens of cancel-storm requests (long enough that a prefill takes a while)",
    "cancel_max_tokens": "max_tokens of cancel-storm requests",
    "cancel_prefill_ms": "a mid-prefill cancel hangs up this long after sending",
    "cancel_decode_words": "a mid-decode cancel hangs up after this many content words",
    "burst_size": "requests a tenant_burst user sends at once",
    "burst_tenant": "the tenant that bursts (default: the last interactive tenant)",
    "turns": "turns per multi-turn session before a new one starts",
    "session_context_tokens": "words of the document a multi-turn session opens with (what its KV holds between turns)",
    "long_session_fraction": "share of multi-turn sessions that are long: a larger document and twice the turns",
    "long_session_context_tokens": "words of a long session's opening document",
    "idle_gap_min_s": "shortest idle gap between two turns of a session",
    "idle_gap_max_s": "longest idle gap between two turns of a session",
    "unrebuildable_fraction": "share of sessions sent with X-Session-Rebuildable: false (evicted -> 410)",
    "wait_min_s": "shortest think time between two requests of a user",
    "wait_max_s": "longest think time between two requests of a user",
    "kill_interval_s": "seconds between two worker kills (worker_kill)",
    "tier_chaos_interval_s": "seconds between two KV tier chaos steps (tier_chaos; 0: no chaos, the user stops)",
    "tier_chaos_slowdown": "tier_chaos cuts the tiers' read bandwidth by this factor for one step",
    "tier_chaos_failure_rate": "share of tier loads tier_chaos makes fail while its failures are on",
    "router_chaos_interval_s": "seconds between two router chaos steps (router_chaos; 0: no chaos, the user stops)",
    "pd_chaos_interval_s": "seconds between two P/D link chaos steps (pd_transfer_chaos; 0: no chaos, the user stops)",
    "step_users": "users added at every step of the step-load shape",
    "step_s": "seconds per step of the step-load shape",
    "step_max_users": "the step-load shape stops adding users here",
    "step_hold_s": "once rejections (429) begin (or max users is reached), hold this long, then stop",
    "request_timeout_s": "a request with no end after this long is a timeout",
    "rate": "open loop (docs/load.md): chat requests (short_qa's) per second on average, sent on the arrivals "
    "schedule whatever the target does",
    "arrivals": "open loop: the schedule at the rate, poisson | constant | bursts",
    "arrival_burst_size": "open loop, bursts: requests per burst",
    "arrival_seed": "open loop: the seed of the arrival schedule (the same seed, the same times)",
    "trace": "open loop: send this request trace (Mooncake JSONL, Azure 2023 or BurstGPT CSV) at its own times "
    "instead of chat at a rate (only the master reads it)",
    "trace_format": "open loop: the trace's format (auto: from its first line)",
    "rate_scale": "open loop, trace: multiply its arrival rate by this",
    "time_scale": "open loop, trace: stretch its time axis by this",
    "size_scale": "open loop, trace: multiply every prompt and output length and the prefix block size by this",
    "max_requests": "open loop: send at most this many requests (0: as many as the schedule holds)",
    "schedule_s": "open loop: seconds of schedule (default: locust's --run-time)",
    "max_in_flight": "open loop: requests each locust process holds open at once; more wait, and show as lag",
    "max_lag_ms": "open loop: P99 client lag (per locust process) beyond which the run is a harness error",
    "load_json": "the master writes who sent the load to this JSON file: locust workers, their clock offsets and "
    "kvgate versions, and what an open-loop schedule dealt to each (kvgate run reads it)",
    "token_model": "what a prompt costs in the target's tokens, per_word,per_message,base,per_other_word (kvgate run "
    "measures it "
    "with the target's /tokenize or --tokenizer; default: the reference engine's one token per word)",
    "mix": "users per scenario in the mixed default, as weights: multi_turn=4,long_output=2 (unnamed: 1)",
    "requests_csv": "write every request (run-record columns) to this CSV file (the master writes it)",
    "record_dir": "record the run here and judge it when locust quits: verdict table, report, locust's exit "
    "code from the gates (kvgate watch runs beside locust; headless runs)",
    "phase": "phase label of the rows (baseline, load, cooldown)",
    "t0_unix": "unix time the rows' times count from (default: when the test starts)",
}
SECRETS = frozenset({"tenants", "admin_key"})


def parse_mix(spec: str) -> dict[str, float]:
    """`multi_turn=4,long_output=2` -> {scenario: weight}; '' -> {} (every scenario weighs 1)."""
    weights: dict[str, float] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = weight = float(value)
        except ValueError:
            weight = -1.0
        if not name.strip() or weight < 0:
            raise SettingsError(
                f"{option('mix')}: {item!r} is not scenario=weight (a number >= 0), e.g. multi_turn=4,long_output=2"
            )
    return weights


def apply_mix(user_classes: Iterable[type[Any]], weights: Mapping[str, float]) -> None:
    """Give each scenario's user class its weight in the mix (locust spawns users in proportion
    to their classes' weights). Scenarios the mix does not name keep their weight; names of
    scenarios not in this run are ignored, so one profile's mix serves any selection."""
    for cls in user_classes:
        name = getattr(cls, "scenario", "")
        if name in weights:
            cls.weight = weights[name]


def option(name: str) -> str:
    return f"--kvgate-{name.replace('_', '-')}"


def dest(name: str) -> str:
    return f"kvgate_{name}"


def env_var(name: str) -> str:
    return f"KVGATE_{name.upper()}"


def env_fields(environ: Mapping[str, str]) -> set[str]:
    """The settings `environ` sets (a KVGATE_* variable each)."""
    return {f.name for f in fields(LoadSettings) if env_var(f.name) in environ}


def add_arguments(parser: Any) -> None:
    """Add every setting to locust's argument parser (configargparse: `env_var` is honoured)."""
    for f in fields(LoadSettings):
        parser.add_argument(
            option(f.name),
            dest=dest(f.name),
            type=type(f.default),
            default=f.default,
            env_var=env_var(f.name),
            help=OPTIONS[f.name],
            is_secret=f.name in SECRETS,
        )
