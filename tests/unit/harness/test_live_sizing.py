"""A live run on a target: timed, sized (or not), and the record says which and why."""

from __future__ import annotations

import pytest

from harness import live_run
from harness.cli import build_parser
from harness.commands.run import build_plan
from harness.target_speed import SpeedNotMeasuredError, TargetSpeed

CPU = TargetSpeed(first_token_s=0.05, prefill_s_per_token=1 / 300, decode_s_per_token=1 / 20, max_model_len=2048)


class Phases:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def phase(self, name: str, detail: str = "") -> None:
        self.lines.append(f"{name}: {detail}")

    def load(self, *args: object) -> None:
        pass


def sized(monkeypatch: pytest.MonkeyPatch, *argv: str, speed: TargetSpeed | Exception = CPU):
    def measure(*args: object, **kwargs: object) -> TargetSpeed:
        if isinstance(speed, Exception):
            raise speed
        return speed

    monkeypatch.setattr(live_run, "measure_speed", measure)
    plan = build_plan(build_parser().parse_args(["run", "--target", "http://t", "--out", "/tmp/x", *argv]))
    progress = Phases()
    return (plan, *live_run._size_to_target(plan, plan.settings, "http://t", "sk", progress), progress)


def test_a_slow_target_runs_a_sized_load_and_the_record_says_from_what_to_what(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planned, plan, settings, sizing, progress = sized(monkeypatch, "--profile", "quick", "--scenarios", "cancel_storm")
    assert plan.users < planned.users and settings.cancel_prompt_tokens < planned.settings.cancel_prompt_tokens
    assert sizing.live["target_speed"]["measured"] and sizing.live["target_speed"]["max_model_len"] == 2048
    assert sizing.live["sizing"]["changes"]["users"] == [planned.users, plan.users]
    assert any(n.startswith("the quick profile was sized to the target's speed: ") for n in sizing.notes)
    assert any(
        line.startswith("sizing: sized to the target's speed: cancel_prompt_tokens 4096 → ") for line in progress.lines
    )


def test_with_fixed_profile_the_speed_is_recorded_and_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    planned, plan, settings, sizing, _ = sized(monkeypatch, "--profile", "quick", "--fixed-profile")
    assert (plan, settings) == (planned, planned.settings) and "sizing" not in sizing.live
    assert sizing.live["target_speed"]["decode_tokens_per_s"] == 20


def test_a_target_whose_probes_are_not_served_runs_unsized_for_its_gates_to_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = SpeedNotMeasuredError("the timing probe of 64 prompt tokens was not served: error http_503")
    planned, plan, settings, sizing, _ = sized(monkeypatch, "--profile", "quick", speed=broken)
    assert (plan, settings) == (planned, planned.settings)
    assert sizing.live["target_speed"] == {"measured": False, "detail": str(broken)}
    assert "not sized to the target" in sizing.notes[0]
