"""Sizing a profile's load to a target's measured speed: the rule, the order, what wins over it."""

from __future__ import annotations

import pytest

from harness.load_sizing import FINISH_FACTOR, MAX_DURATION_GROWTH, TIMEOUT_FACTOR, PlannedLoad, size_load
from harness.loadgen.settings import LoadSettings
from harness.profiles import get_profile, request_timeout
from harness.target_speed import TargetSpeed, TargetTooSlowError

CPU = TargetSpeed(first_token_s=0.05, prefill_s_per_token=1 / 300, decode_s_per_token=1 / 20, max_model_len=None)
"""A small model on two CPU cores: hundreds of prompt tokens a second, twenty answer tokens."""
GPU = TargetSpeed(
    first_token_s=0.02, prefill_s_per_token=1 / 50_000, decode_s_per_token=1 / 500, max_model_len=None, parallelism=8
)
CRAWL = TargetSpeed(first_token_s=2.0, prefill_s_per_token=1 / 5, decode_s_per_token=2.0, max_model_len=None)


def quick(*scenarios: str, explicit: frozenset[str] = frozenset(), **settings: object) -> PlannedLoad:
    """The quick profile's load as `kvgate run` plans it (its request timeout capped to the run)."""
    profile = get_profile("quick")
    planned = LoadSettings(**{**profile.settings, **settings})  # type: ignore[arg-type]
    cap = request_timeout(planned.request_timeout_s, profile.duration_s, profile.stop_timeout_s)
    return PlannedLoad(
        settings=planned.with_(request_timeout_s=cap),
        scenarios=scenarios,
        users=profile.users,
        duration_s=profile.duration_s,
        stop_timeout_s=profile.stop_timeout_s,
        explicit=explicit,
    )


def test_a_fast_target_keeps_the_profile_as_it_is() -> None:
    sized = size_load(quick("cancel_storm", "short_qa"), GPU)
    assert sized.changes == {} and sized.settings == quick().settings
    assert "nothing changed" in sized.describe()


def test_a_slow_target_gets_smaller_requests_that_finish_well_inside_the_load() -> None:
    planned = quick("cancel_storm", "short_qa", "long_output")
    sized = size_load(planned, CPU)
    assert FINISH_FACTOR * sized.expected_latency_s <= sized.duration_s
    assert sized.settings.cancel_prompt_tokens < planned.settings.cancel_prompt_tokens
    assert sized.settings.long_output_tokens < planned.settings.long_output_tokens
    assert sized.changes["long_output_tokens"] == (1024, sized.settings.long_output_tokens)
    assert sized.settings.long_prompt_tokens == planned.settings.long_prompt_tokens  # not in this run: untouched
    assert "long_output_tokens 1024 → " in sized.describe()
    assert sized.to_dict()["changes"]["users"] == [54, sized.users]


def test_fewer_users_than_the_mix_needs_drop_the_mix_so_that_every_scenario_keeps_a_user() -> None:
    planned = quick("cancel_storm", "short_qa", "long_output")  # quick weighs them 2, 1 and 20
    sized = size_load(planned, CPU)
    assert sized.users < 23 and sized.settings.mix == ""
    assert sized.changes["mix"] == (planned.settings.mix, "") and "mix 'multi_turn=8," in sized.describe()
    assert size_load(quick("cancel_storm", "short_qa", "long_output"), GPU).settings.mix == planned.settings.mix


def test_fewer_users_come_before_a_longer_load_and_the_load_grows_only_so_far() -> None:
    sized = size_load(quick("long_output"), CPU)
    assert sized.users < 54 and sized.duration_s == 16  # fewer users were enough
    sized = size_load(quick("short_qa", explicit=frozenset({"users"})), CPU)
    assert sized.users == 54 and 16 < sized.duration_s <= MAX_DURATION_GROWTH * 16


def test_the_timeouts_leave_a_slow_request_time_to_end_inside_the_run() -> None:
    sized = size_load(quick("long_output", "batch_mix"), CPU)
    assert sized.settings.request_timeout_s >= TIMEOUT_FACTOR * sized.expected_latency_s - 0.1
    assert sized.stop_timeout_s >= TIMEOUT_FACTOR * sized.expected_latency_s
    assert sized.settings.request_timeout_s <= sized.duration_s + sized.stop_timeout_s


def test_a_long_prompt_is_cut_to_the_context_the_target_reports() -> None:
    fast_short_context = TargetSpeed(
        first_token_s=0.01, prefill_s_per_token=1e-6, decode_s_per_token=1e-4, max_model_len=2048, parallelism=8
    )
    sized = size_load(quick("long_prompt"), fast_short_context)
    long_prompt = sized.settings.long_prompt_tokens
    assert long_prompt + sized.settings.max_tokens <= 0.9 * 2048 and long_prompt > 1500
    assert sized.changes == {"long_prompt_tokens": (7000, long_prompt)}


def test_what_the_user_set_wins_over_the_sizing_and_a_broken_rule_is_said() -> None:
    explicit = frozenset({"users", "duration_s", "cancel_prompt_tokens", "request_timeout_s"})
    sized = size_load(quick("cancel_storm", explicit=explicit, request_timeout_s=25.0), CPU)
    assert (sized.users, sized.duration_s) == (54, 16)
    assert sized.settings.cancel_prompt_tokens == 4096 and sized.settings.request_timeout_s == 25.0
    assert not {"users", "duration_s", "cancel_prompt_tokens", "request_timeout_s"} & set(sized.changes)
    assert sized.warnings and "may be cut at the stop" in sized.warnings[0]


def test_a_target_far_too_slow_for_a_minimal_run_is_a_harness_error() -> None:
    with pytest.raises(TargetTooSlowError, match="too slow for even the smallest 16 s run") as err:
        size_load(quick("short_qa", "long_output"), CRAWL)
    assert "decode 0.5 tokens/s" in str(err.value) and "--duration" in str(err.value)


def test_a_duration_the_user_set_runs_even_on_a_target_too_slow_for_it_with_a_warning() -> None:
    sized = size_load(quick("short_qa", "long_output", explicit=frozenset({"duration_s", "users"})), CRAWL)
    assert (sized.users, sized.duration_s) == (54, 16)
    assert sized.warnings and "may be cut at the stop" in sized.warnings[0]


def test_a_cancel_storm_prompt_still_takes_longer_to_prefill_than_the_hang_up() -> None:
    sized = size_load(quick("cancel_storm"), CPU)
    assert sized.settings.cancel_prompt_tokens * CPU.prefill_s_per_token > sized.settings.cancel_prefill_ms / 1000
