"""A profile's load sized to an external target's measured speed, so its requests finish in the run.

    sized = size_load(planned, speed)       # planned: PlannedLoad; speed: harness/target_speed.py
    sized.settings, sized.users, sized.duration_s, sized.changes   # what to run, what changed

The profiles (harness/profiles.py) are sized for kvgate's simulated engine. On a CPU server
that decodes tens of tokens a second their requests outlast the load, are cut at the stop and
count `unfinished`: an honest failure, but not a measurement of the cache. So on a `--target`
the load is sized from the target's speed by one rule:

    FINISH_FACTOR × max(1, users / parallelism) × work_s ≤ duration

`work_s` is the slowest scenario's unit of work — one request, a tenant_burst user's whole
burst — alone on the target (`TargetSpeed.request_s`), and the product its expected latency at
the planned concurrency: the target serves `parallelism` requests at once as fast as one (it
was measured with a few at once, `TargetSpeed.parallelism`) and more in turn, so every unit of
work finishes within 1/FINISH_FACTOR of the load. To meet it, in this order:

1. each scenario's request is cut to the target's context (`CONTEXT_FILL` of `max_model_len`,
   where the server reports it): a 32K-token long prompt becomes what fits;
2. if even the smallest sizes (`floors`) cannot meet it, fewer users (down to one per
   scenario), then a longer load (up to `MAX_DURATION_GROWTH` × the profile's); a run that
   cannot meet it even so is a `TargetTooSlowError` (exit 2), never a verdict. When fewer users
   spread by the profile's mix would leave a scenario without one, the mix goes (every
   scenario weighs the same);
3. every token size is scaled by one factor, the largest that meets it (so the profile keeps its
   proportions: a long prompt stays many short ones), none below its floor;
4. the request timeout and locust's stop timeout become at least `TIMEOUT_FACTOR` × the
   expected latency at the planned concurrency, so that a slow request is not cut for being
   slow, and one sent just before the stop still has that long to finish (the timeout stays
   within the load plus the stop timeout: `harness.profiles.request_timeout`).

Only ever smaller sizes, fewer users, a longer load: a fast target keeps the profile as it is.
Whatever the user set (`explicit`: `--duration`, `--users`, `--request-timeout`, a KVGATE_*
variable) is never changed; where it breaks the rule the run goes ahead and `warnings` say so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from harness.loadgen.settings import LoadSettings, parse_mix
from harness.profiles import request_timeout
from harness.target_speed import TargetSpeed, TargetTooSlowError

FINISH_FACTOR = 3.0
TIMEOUT_FACTOR = 2.0
MAX_DURATION_GROWTH = 4.0
CONTEXT_FILL = 0.9
"""A request's prompt and answer may fill this share of max_model_len (token counts are a fit)."""
MIN_QUESTION_TOKENS = 16
MIN_OUTPUT_TOKENS = 16
MIN_DOCUMENT_WORDS = 16
CANCEL_PREFILL_MARGIN = 3.0
"""A cancel-storm prompt keeps at least this many times the tokens the target prefills before
the mid-prefill hang-up (`cancel_prefill_ms`), so the hang-up still lands in its prefill."""

PROMPT_FIELDS = (
    "prompt_tokens",
    "long_prompt_tokens",
    "long_output_prompt_tokens",
    "batch_prompt_tokens",
    "cancel_prompt_tokens",
)
OUTPUT_FIELDS = ("max_tokens", "long_output_tokens", "batch_max_tokens")
WORD_FIELDS = ("document_tokens", "session_context_tokens", "long_session_context_tokens")
SIZED_FIELDS = PROMPT_FIELDS + OUTPUT_FIELDS + WORD_FIELDS
"""The LoadSettings fields sizing may scale: prompt tokens, answer tokens, document words."""


@dataclass(frozen=True)
class Work:
    """One unit of a scenario's work: `num_requests` requests of these sizes sent at once."""

    prompt_tokens: float
    output_tokens: float
    num_requests: int = 1

    def seconds(self, speed: TargetSpeed) -> float:
        return max(1.0, self.num_requests / speed.parallelism) * speed.request_s(self.prompt_tokens, self.output_tokens)

    @property
    def context_tokens(self) -> float:
        return self.prompt_tokens + self.output_tokens


SHORT = ("prompt_tokens", "max_tokens")


@dataclass(frozen=True)
class ScenarioWork:
    """A scenario's largest unit of work under some settings, and the sized fields it depends on:
    `own` are its alone (what step 1 cuts to the context), `uses` all of them."""

    work: Work
    own: tuple[str, ...]
    uses: tuple[str, ...]


def _work_of(s: LoadSettings) -> dict[str, ScenarioWork]:
    """Each scenario's largest unit of work under `s`. Scenarios with no completions
    (worker_kill) are absent."""
    per_word = s.tokens.per_word
    history = 2 * s.turns * (s.prompt_tokens + s.max_tokens)  # a long session's last turn
    long_output = ("long_output_prompt_tokens", "long_output_tokens")
    batch = ("batch_prompt_tokens", "batch_max_tokens")
    sessions = ("session_context_tokens", "long_session_context_tokens")
    return {
        "short_qa": ScenarioWork(Work(s.prompt_tokens, s.max_tokens), SHORT, SHORT),
        "step_load": ScenarioWork(Work(s.prompt_tokens, s.max_tokens), SHORT, SHORT),
        "long_prompt": ScenarioWork(
            Work(s.long_prompt_tokens, s.max_tokens), ("long_prompt_tokens",), ("long_prompt_tokens", "max_tokens")
        ),
        "long_output": ScenarioWork(Work(s.long_output_prompt_tokens, s.long_output_tokens), long_output, long_output),
        "shared_prefix": ScenarioWork(
            Work(2 * s.document_tokens * per_word + s.prompt_tokens, s.max_tokens),
            ("document_tokens",),
            ("document_tokens", *SHORT),
        ),
        # a mid-prefill hang-up leaves the target its prompt's prefill; a mid-decode one decodes some words
        "cancel_storm": ScenarioWork(
            Work(s.cancel_prompt_tokens, s.cancel_decode_words), ("cancel_prompt_tokens",), ("cancel_prompt_tokens",)
        ),
        "tenant_burst": ScenarioWork(Work(s.prompt_tokens, s.max_tokens, s.burst_size), SHORT, SHORT),
        "batch_mix": ScenarioWork(Work(s.batch_prompt_tokens, s.batch_max_tokens), batch, (*batch, *SHORT)),
        "multi_turn": ScenarioWork(
            Work(s.long_session_context_tokens * per_word + history, s.max_tokens), sessions, (*sessions, *SHORT)
        ),
    }


@dataclass(frozen=True, kw_only=True)
class PlannedLoad:
    """The load a profile plans, before sizing: settings after the profile, config and env."""

    settings: LoadSettings
    scenarios: tuple[str, ...]
    users: int
    duration_s: float
    stop_timeout_s: float
    explicit: frozenset[str] = frozenset()
    """What the user set: "users", "duration_s", and LoadSettings field names."""


@dataclass(frozen=True, kw_only=True)
class SizedLoad:
    settings: LoadSettings
    users: int
    duration_s: float
    stop_timeout_s: float
    expected_latency_s: float
    """The slowest unit of work at the planned concurrency, as the rule models it."""
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """What sizing changed: name -> (planned, sized)."""
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """meta.live.sizing."""
        return {
            "rule": f"{FINISH_FACTOR:g} × max(1, users / parallelism) × slowest unit of work alone ≤ load duration",
            "expected_latency_s": round(self.expected_latency_s, 2),
            "changes": {k: list(v) for k, v in self.changes.items()},
            "warnings": list(self.warnings),
        }

    def describe(self) -> str:
        """One line for the console and the notes: what changed, from what to what."""
        if not self.changes:
            return "the profile fits the target's speed: nothing changed"
        return "sized to the target's speed: " + ", ".join(
            f"{k} {_shown(a)} → {_shown(b)}" for k, (a, b) in self.changes.items()
        )


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else repr(value)


def size_load(planned: PlannedLoad, speed: TargetSpeed) -> SizedLoad:
    """The rule of the module docstring, applied to `planned` on a target of `speed`."""
    s, explicit = planned.settings, planned.explicit
    used = {f for name, w in _work_of(s).items() if name in planned.scenarios for f in w.uses}
    free = [f for f in SIZED_FIELDS if f in used and f not in explicit]
    floors = _floors(s, speed)
    s = _fit_context(s, speed.max_model_len, free, floors, planned.scenarios)
    need_s = _work_s(_scaled(s, 0.0, free, floors), speed, planned.scenarios)
    minimal_s = _work_s(_scaled(s, 0.0, [f for f in SIZED_FIELDS if f in used], floors), speed, planned.scenarios)
    users, duration_s = _users_and_duration(planned, need_s, minimal_s, speed)
    if users < planned.users and "mix" not in explicit and _starves(s.mix, users, planned.scenarios):
        s = s.with_(mix="")
    budget_s = duration_s / (FINISH_FACTOR * _in_turn(users, speed))
    scale = _largest(lambda x: _work_s(_scaled(s, x, free, floors), speed, planned.scenarios) <= budget_s)
    s = _scaled(s, scale, free, floors)
    latency_s = _in_turn(users, speed) * _work_s(s, speed, planned.scenarios)
    stop_timeout_s = max(planned.stop_timeout_s, TIMEOUT_FACTOR * latency_s)
    if "request_timeout_s" not in explicit:
        s = s.with_(request_timeout_s=max(s.request_timeout_s, round(TIMEOUT_FACTOR * latency_s, 1)))
    s = s.with_(request_timeout_s=request_timeout(s.request_timeout_s, duration_s, stop_timeout_s))
    warnings = []
    if FINISH_FACTOR * latency_s > duration_s:
        warnings.append(
            f"the settings you gave ({', '.join(sorted(explicit)) or 'none'}) leave the slowest scenario "
            f"{latency_s:.1f} s at {users} users: more than 1/{FINISH_FACTOR:g} of the {duration_s:.0f} s load, "
            f"so requests may be cut at the stop"
        )
    warnings += _context_warnings(s, speed.max_model_len, planned.scenarios)
    changes = _changes(planned, s, users=users, duration_s=duration_s, stop_timeout_s=stop_timeout_s)
    return SizedLoad(
        settings=s,
        users=users,
        duration_s=duration_s,
        stop_timeout_s=stop_timeout_s,
        expected_latency_s=latency_s,
        changes=changes,
        warnings=tuple(warnings),
    )


def _in_turn(users: int, speed: TargetSpeed) -> float:
    """How many units of work a user's waits behind, its own included: the rule's concurrency."""
    return max(1.0, users / speed.parallelism)


def _floors(s: LoadSettings, speed: TargetSpeed) -> dict[str, int]:
    """The smallest value of each sized field: a prompt still holds the system prompt and a
    question, an answer some words, a cancel-storm prompt a prefill the hang-up lands in. A
    floor is never above the planned value."""
    fixed = s.tokens.count([{"role": "system", "content": s.system_prompt}, {"role": "user", "content": ""}])
    floors = {f: fixed + MIN_QUESTION_TOKENS for f in PROMPT_FIELDS}
    floors |= {f: MIN_OUTPUT_TOKENS for f in OUTPUT_FIELDS} | {f: MIN_DOCUMENT_WORDS for f in WORD_FIELDS}
    in_prefill = speed.prefilled_in(CANCEL_PREFILL_MARGIN * s.cancel_prefill_ms / 1000)
    floors["cancel_prompt_tokens"] = max(floors["cancel_prompt_tokens"], math.ceil(fixed + in_prefill))
    return {f: min(v, getattr(s, f)) for f, v in floors.items()}


def _scaled(s: LoadSettings, scale: float, free: Iterable[str], floors: Mapping[str, int]) -> LoadSettings:
    return s.with_(**{f: max(floors[f], round(getattr(s, f) * scale)) for f in free})


def _work_s(s: LoadSettings, speed: TargetSpeed, scenarios: Iterable[str]) -> float:
    """The slowest unit of work of the run's scenarios, alone on the target."""
    work = _work_of(s)
    return max((work[n].work.seconds(speed) for n in scenarios if n in work), default=0.0)


def _largest(fits: Callable[[float], bool]) -> float:
    """The largest scale in [0, 1] that `fits` (monotone: smaller always fits if larger does)."""
    if fits(1.0):
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def _fit_context(
    s: LoadSettings, max_model_len: int | None, free: list[str], floors: Mapping[str, int], scenarios: Iterable[str]
) -> LoadSettings:
    """Each scenario's own sizes cut, by one factor per scenario, until its largest request fits
    CONTEXT_FILL of the target's context."""
    if max_model_len is None:
        return s
    limit = CONTEXT_FILL * max_model_len
    for name in scenarios:
        if name in _work_of(s):
            s = _cut_to(limit, s, name, [f for f in _work_of(s)[name].own if f in free], floors)
    return s


def _cut_to(limit: float, s: LoadSettings, name: str, mine: list[str], floors: Mapping[str, int]) -> LoadSettings:
    """`mine` scaled by the largest factor that brings `name`'s largest request within `limit` tokens."""

    def fits(scale: float) -> bool:
        return _work_of(_scaled(s, scale, mine, floors))[name].work.context_tokens <= limit

    return _scaled(s, _largest(fits), mine, floors)


def _context_warnings(s: LoadSettings, max_model_len: int | None, scenarios: Iterable[str]) -> list[str]:
    if max_model_len is None:
        return []
    work = _work_of(s)
    return [
        f"{name}'s largest request ({work[name].work.context_tokens:.0f} tokens) does not fit "
        f"{CONTEXT_FILL:.0%} of the target's context ({max_model_len}): expect 400 context_length_exceeded"
        for name in scenarios
        if name in work and work[name].work.context_tokens > CONTEXT_FILL * max_model_len
    ]


def _users_and_duration(planned: PlannedLoad, need_s: float, minimal_s: float, speed: TargetSpeed) -> tuple[int, float]:
    """Fewer users, then a longer load, until the smallest units of work (`need_s`: what the user
    set kept) meet the rule, as far as the user's own users and duration let them. Raises when
    even the minimal run (`minimal_s`: every size at its floor; one user per scenario; the
    longest load) cannot meet it, unless the user set the duration: then the run goes ahead as
    asked, and `size_load` warns that requests may be cut at the stop."""
    users, duration_s = planned.users, planned.duration_s

    def wanted_s(num_users: int, work_s: float) -> float:
        return FINISH_FACTOR * _in_turn(num_users, speed) * work_s

    min_users = min(users, max(1, len(planned.scenarios)))
    longest_s = duration_s if "duration_s" in planned.explicit else MAX_DURATION_GROWTH * duration_s
    if wanted_s(min_users, minimal_s) > longest_s and "duration_s" not in planned.explicit:
        raise TargetTooSlowError(
            f"the target is too slow for even the smallest {planned.duration_s:.0f} s run: its slowest scenario's "
            f"smallest unit of work takes {minimal_s:.1f} s alone (prefill {speed.prefill_tokens_per_s:.0f} "
            f"tokens/s, decode {speed.decode_tokens_per_s:.1f} tokens/s, first token {speed.first_token_s:.2f} s), "
            f"and even {min_users} user(s) need {wanted_s(min_users, minimal_s):.0f} s of load for it to finish "
            f"within 1/{FINISH_FACTOR:g} of it (at most {longest_s:.0f} s here). Name fewer or lighter scenarios "
            f"(--scenarios), or give a longer --duration"
        )
    if "users" not in planned.explicit and wanted_s(users, need_s) > duration_s:
        users = max(min_users, math.floor(speed.parallelism * duration_s / (FINISH_FACTOR * need_s)))
    if wanted_s(users, need_s) > duration_s:
        duration_s = min(longest_s, math.ceil(wanted_s(users, need_s)))
    return users, duration_s


def _starves(mix: str, users: int, scenarios: Iterable[str]) -> bool:
    """Whether `users` spread by the mix's weights leave a scenario of the run without one."""
    weights = parse_mix(mix)
    run = [weights.get(name, 1.0) for name in scenarios]
    return bool(run) and users * min(run) < sum(run)


def _changes(planned: PlannedLoad, s: LoadSettings, **sized: float) -> dict[str, tuple[Any, Any]]:
    before = {f.name: getattr(planned.settings, f.name) for f in fields(LoadSettings)}
    after = {f.name: getattr(s, f.name) for f in fields(LoadSettings)}
    changes = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    for name, value in sized.items():
        planned_value = getattr(planned, name)
        if value != planned_value:
            changes[name] = (planned_value, value)
    return changes
