from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.loadgen.settings import (
    OPTIONS,
    LoadSettings,
    SettingsError,
    add_arguments,
    apply_mix,
    dest,
    env_var,
    parse_mix,
)
from harness.loadgen.tenants import TenantSpecError
from reference_engine.config import ADMIN_KEY_VAR, DEV_ADMIN_KEY


class RecordingParser:
    """Stands in for locust's parser: records the add_argument calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def add_argument(self, *args, **kwargs) -> None:
        self.calls.append((args, kwargs))


def test_every_setting_is_an_option_and_an_environment_variable_with_help() -> None:
    parser = RecordingParser()
    add_arguments(parser)
    names = {args[0] for args, _ in parser.calls}
    assert names == {f"--kvgate-{f.replace('_', '-')}" for f in OPTIONS}
    kwargs = dict((args[0], kw) for args, kw in parser.calls)
    assert kwargs["--kvgate-prompt-tokens"]["env_var"] == "KVGATE_PROMPT_TOKENS"
    assert kwargs["--kvgate-tenants"]["is_secret"] and not kwargs["--kvgate-model"]["is_secret"]
    assert all(kw["help"] for kw in kwargs.values())


def test_settings_come_from_locusts_parsed_options() -> None:
    options = argparse.Namespace(**{dest("prompt_tokens"): 128, dest("model"): "m", "num_users": 3})
    s = LoadSettings.from_options(options)
    assert (s.prompt_tokens, s.model, s.max_tokens) == (128, "m", LoadSettings().max_tokens)
    assert LoadSettings.from_options(None) == LoadSettings()


def test_environment_variables_round_trip() -> None:
    s = LoadSettings(prompt_tokens=99, cancel_prefill_ms=12.5, tenants="me=sk-1:batch", model="x")
    assert LoadSettings().with_env(s.to_env()) == s
    assert env_var("cancel_prefill_ms") in s.to_env()


def test_a_badly_typed_environment_variable_names_itself() -> None:
    with pytest.raises(SettingsError, match="KVGATE_PROMPT_TOKENS"):
        LoadSettings().with_env({"KVGATE_PROMPT_TOKENS": "many"})


@pytest.mark.parametrize(
    "changes",
    [
        {"prompt_tokens": 0},
        {"wait_min_s": 2.0, "wait_max_s": 1.0},
        {"unrebuildable_fraction": 1.5},
        {"cancel_prefill_ms": -1.0},
        {"step_s": 0.0},
    ],
)
def test_out_of_range_settings_are_refused_with_the_option_name(changes: dict) -> None:
    with pytest.raises(SettingsError, match="--kvgate-"):
        LoadSettings(**changes)


def test_a_bad_tenant_spec_is_refused() -> None:
    with pytest.raises(TenantSpecError):
        LoadSettings(tenants="nokey")


def test_every_setting_is_documented_in_docs_scenarios_md() -> None:
    section = Path("docs/scenarios.md").read_text().split("## Settings", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    documented = {name.strip().strip("`") for cell in first_cells for name in cell.split(",")}
    assert documented == {name.replace("_", "-") for name in OPTIONS}


def test_the_mix_weighs_scenarios_by_name() -> None:
    class A:
        scenario, weight = "multi_turn", 1

    class B:
        scenario, weight = "short_qa", 1

    apply_mix([A, B], parse_mix("multi_turn=4, other=2"))
    assert (A.weight, B.weight) == (4.0, 1)
    assert parse_mix("") == {}
    for bad in ("multi_turn", "multi_turn=x", "=3", "short_qa=-1"):
        with pytest.raises(SettingsError, match="scenario=weight"):
            LoadSettings(mix=bad)


def test_the_default_admin_key_is_the_engines_dev_key_read_from_where_serve_reads_it() -> None:
    # only an engine started with `kvgate serve --dev` takes it; KVGATE_ADMIN_KEY names the real one
    assert LoadSettings().admin_key == DEV_ADMIN_KEY and env_var("admin_key") == ADMIN_KEY_VAR
