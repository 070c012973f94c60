"""`kvgate run` turns its command line, a profile and a config into one LivePlan."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import build_parser, main
from harness.collectors.isolation import TIMING_KINDS, ProbeOptions
from harness.collectors.llamacpp_slots import KvLayout
from harness.commands.run import build_plan, print_pressure
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import DEFAULT_SPEC, parse_tenants
from harness.profiles import get_profile
from harness.scenario_catalog import scenarios_dir
from record.errors import KvgateError
from record.pressure import measure_pressure
from tests.fixtures.records import RecordBuilder

SERVER_PROMPT = "You are a test assistant . Keep every answer short ."


def plan(*argv: str, monkeypatch: pytest.MonkeyPatch | None = None):
    return build_plan(build_parser().parse_args(["run", *argv]))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "engine.toml"
    path.write_text(f"""
[server]
admin_key = "sk-admin-test"
served_model_name = "served-name"

[[prefix_cache.public_prefixes]]
name = "system"
text = "{SERVER_PROMPT}"
pinned = true

[tenants.acme]
api_keys = ["sk-a1", "sk-a2"]

[tenants.bulk]
api_keys = ["sk-bulk"]
traffic_class = "batch"
""")
    return path


def test_a_policy_run_takes_tenants_public_prefix_and_model_from_the_config(config: Path) -> None:
    p = plan("--policy", str(config), "--profile", "quick")
    s = p.settings
    assert parse_tenants(s.tenants) == parse_tenants("acme=sk-a1:interactive,bulk=sk-bulk:batch")
    assert (s.system_prompt, s.model) == (SERVER_PROMPT, "served-name")
    quick = get_profile("quick")
    assert (p.duration_s, p.users, p.profile, p.target_url) == (quick.duration_s, quick.users, "quick", None)
    assert s.long_output_tokens == quick.settings["long_output_tokens"]  # the quick profile's size
    assert p.mixed_dir == scenarios_dir() and len(p.scenarios) == 13
    assert p.run_dir.parent == Path("runs") and p.run_dir.name.endswith("-lru")


def test_command_line_wins_over_environment_over_config_over_profile(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVGATE_PROMPT_TOKENS", "99")
    monkeypatch.setenv("KVGATE_MODEL", "from-env")
    p = plan(
        "--policy",
        str(config),
        "--profile",
        "quick",
        "--model",
        "from-cli",
        "--duration",
        "3",
        "--users",
        "2",
        "--scenarios",
        "cancel_storm,short_qa",
        "--out",
        "/tmp/x",
    )
    assert (p.settings.prompt_tokens, p.settings.model) == (99, "from-cli")
    assert (p.duration_s, p.users, p.mixed_dir, [s.name for s in p.scenarios]) == (
        3,
        2,
        None,
        ["cancel_storm", "short_qa"],
    )
    assert p.run_dir == Path("/tmp/x")


def test_the_profile_resizes_the_engine_it_starts(config: Path) -> None:
    p = plan("--policy", str(config), "--profile", "quick")
    assert p.engine_overrides == get_profile("quick").engine_overrides
    assert p.config.hardware.kv_pool_gib == p.engine_overrides["hardware.kv_pool_gib"]
    assert p.config.engine.max_num_seqs == p.engine_overrides["engine.max_num_seqs"]
    untouched = plan("--policy", str(config), "--profile", "full")
    assert untouched.engine_overrides == {} and untouched.config.hardware.kv_pool_gib is None


def test_an_external_target_is_never_resized(config: Path) -> None:
    # --policy only names what the target runs: nothing is started, so nothing is changed
    p = plan("--policy", str(config), "--target", "http://127.0.0.1:9000", "--profile", "quick")
    assert p.engine_overrides == {} and p.config.hardware.kv_pool_gib is None


def test_on_a_target_the_policy_names_the_run_only_when_the_user_says_so(config: Path) -> None:
    unlabelled = plan("--policy", str(config), "--target", "http://127.0.0.1:9000")
    assert unlabelled.run_dir.name.endswith("-external") and not unlabelled.label_policy
    labelled = plan("--policy", str(config), "--target", "http://127.0.0.1:9000", "--label-policy")
    assert labelled.label_policy and not labelled.run_dir.name.endswith("-external")
    assert not plan("--policy", str(config), "--label-policy").label_policy  # an engine it starts: always named


def test_an_external_target_needs_no_policy() -> None:
    p = plan("--target", "http://127.0.0.1:9000", "--tenants", "me=sk-1", "--profile", "ci")
    assert (p.config, p.target_url, p.settings.tenants, p.settings.model) == (
        None,
        "http://127.0.0.1:9000",
        "me=sk-1",
        "",
    )
    assert p.run_dir.name.endswith("-external") and plan("--target", "u").settings.tenants == DEFAULT_SPEC


def test_the_request_timeout_never_outlasts_the_load_and_its_stop() -> None:
    quick = get_profile("quick")
    p = plan("--target", "http://127.0.0.1:9000", "--profile", "quick", "--duration", "4")
    assert p.settings.request_timeout_s == 4 + quick.stop_timeout_s == 4 + p.stop_timeout_s
    assert plan("--target", "u", "--profile", "quick", "--request-timeout", "3").settings.request_timeout_s == 3
    assert plan("--target", "u", "--profile", "full").settings.request_timeout_s == LoadSettings().request_timeout_s


def test_a_target_run_is_sized_to_its_speed_keeping_what_the_user_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVGATE_CANCEL_PROMPT_TOKENS", "700")
    p = plan("--target", "http://127.0.0.1:9000", "--users", "4", "--request-timeout", "30")
    assert p.size_to_target and p.explicit == {"users", "request_timeout_s", "cancel_prompt_tokens"}
    assert "duration_s" in plan("--target", "u", "--duration", "20").explicit
    assert not plan("--target", "u", "--fixed-profile").size_to_target  # the profile as written
    assert not plan("--target", "u", "--rate", "2").size_to_target  # an open loop sets its own pace
    assert not plan("--policy", "configs/default.toml").size_to_target  # the reference engine: as profiled


def test_without_policy_or_target_it_says_what_is_needed() -> None:
    with pytest.raises(KvgateError, match="needs --policy CONFIG .* or --target URL"):
        plan()


def test_a_bad_setting_from_the_environment_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVGATE_TURNS", "0")
    with pytest.raises(KvgateError, match="--kvgate-turns must be at least 1"):
        plan("--target", "http://127.0.0.1:9000")


def test_an_engine_the_run_starts_gets_a_fresh_admin_key_and_a_target_keeps_its_configs(config: Path) -> None:
    first, second = plan("--policy", str(config)).settings.admin_key, plan("--policy", str(config)).settings.admin_key
    assert first != second and len(first) >= 32 and "sk-admin-test" not in (first, second)
    target = plan("--policy", str(config), "--target", "http://127.0.0.1:9000")
    assert target.settings.admin_key == "sk-admin-test"


def refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> str:
    """Run `kvgate run ARGV` (against a target nothing listens at); the one line it refused with."""
    monkeypatch.setattr("signal.signal", lambda *_: None)  # `run` installs a SIGTERM handler
    try:
        code = main(["run", "--target", "http://127.0.0.1:9", *argv])
    except SystemExit as usage_error:
        code = usage_error.code
    [line] = capsys.readouterr().err.splitlines()
    assert code == 2, line
    return line


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--tenants", "garbage"], "tenant entry 1 is not name=key[:class]"),
        (["--tenants", "me=sk-acme:vip"], "tenant 'me': what follows the last ':' is not a traffic class"),
        (["--users", "0"], "--users: must be above 0"),
        (["--duration", "-5"], "--duration: must be above 0"),
        (["--spawn-rate", "nan"], "--spawn-rate: must be above 0"),
        (["--sample-interval", "0"], "--sample-interval: must be above 0"),
        (["--workers", "-1"], "--workers: must be a whole number, 0 or more"),
        (["--processes", "two"], "--processes: must be a whole number, 0 or more"),
    ],
)
def test_bad_input_is_refused_in_one_line_with_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert says in refused(capsys, monkeypatch, *argv)


def test_bad_tenants_from_the_environment_and_a_thresholds_typo_are_refused_before_the_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVGATE_TENANTS", "garbage")
    assert "tenant entry 1" in refused(capsys, monkeypatch)
    monkeypatch.delenv("KVGATE_TENANTS")
    typo = tmp_path / "gates.toml"
    typo.write_text("[no_oom]\nmax_ooms = 1\n")
    assert "valid: max_gpu_mem_fraction, max_oom" in refused(capsys, monkeypatch, "--gates", str(typo))


def test_the_console_says_how_far_up_the_ladder_the_run_went(tmp_path: Path) -> None:
    low = measure_pressure(RecordBuilder().event("watermark", 5.0, reason="warn", usage=0.76).build(tmp_path / "low"))
    console = Console(record=True, width=400)
    print_pressure(console, low)
    print_pressure(console, None)
    lines = console.export_text().splitlines()
    assert lines[0].startswith("pressure: reached warn (peak live usage 76% of the pool)")
    assert lines[1].startswith("NEVER REACHED the evict and preempt rungs")
    assert lines[2:] == ["pressure not recorded (the record predates meta.pressure)"]


def test_tenant_caps_hold_every_tenant_or_each_named_one_on_a_target() -> None:
    target = ("--target", "http://127.0.0.1:9", "--tenants", "a=sk-a,b=sk-b")
    assert plan(*target, "--tenant-caps", "0.4").tenant_caps == {"a": 0.4, "b": 0.4}
    assert plan(*target, "--tenant-caps", "0.5,b=0.25").tenant_caps == {"a": 0.5, "b": 0.25}
    assert plan(*target).tenant_caps == {}
    with pytest.raises(KvgateError, match="0 < FRACTION <= 1"):
        plan(*target, "--tenant-caps", "a=40%")


def test_tenant_caps_are_refused_for_the_reference_engine_whose_caps_are_its_configs(config: Path) -> None:
    with pytest.raises(KvgateError, match="--target runs"):
        plan("--policy", str(config), "--tenant-caps", "0.5")


def test_the_target_log_reaches_the_plan(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    assert plan("--target", "http://127.0.0.1:9", "--target-log", str(log)).target_log == log


def test_a_llamacpp_target_s_kv_layout_reaches_the_plan_unified_unless_told() -> None:
    target = ("--target", "http://127.0.0.1:9")
    assert plan(*target).llamacpp_kv is KvLayout.UNIFIED  # llama-server's default without -np
    assert plan(*target, "--llamacpp-kv", "split").llamacpp_kv is KvLayout.SPLIT


def test_extra_isolation_probes_are_asked_for_by_name() -> None:
    assert plan("--target", "http://x").probes == ProbeOptions()  # only the cached-token pair
    both = plan("--target", "http://x", "--probes", "timing,tiers").probes
    assert both.tiers and both.timing == TIMING_KINDS
    with pytest.raises(KvgateError, match="unknown gpu"):
        plan("--target", "http://x", "--probes", "gpu")


def test_replicas_behind_a_gateway_reach_the_plan_and_the_gateway_is_not_read(tmp_path: Path, config: Path) -> None:
    built = plan(
        "--target",
        "http://gw:80",
        "--replica",
        "http://a:8000",
        "--replica",
        f"http://b:8000/,metrics=http://b:9090/metrics,kv-events=tcp://b:5557,log={tmp_path / 'b.log'},name=bee",
    )
    a, b = built.replicas
    assert (a.name, a.url, a.metrics_url, a.kv_events, a.log) == (
        "a:8000",
        "http://a:8000",
        "http://a:8000/metrics",
        "",
        None,
    )
    assert (b.name, b.url, b.metrics_url, b.kv_events, b.log) == (
        "bee",
        "http://b:8000",
        "http://b:9090/metrics",
        "tcp://b:5557",
        tmp_path / "b.log",
    )
    assert built.metrics_url == ""  # the gateway holds no KV: only its replicas are read
    assert plan("--target", "http://gw:80").replicas == ()
    with pytest.raises(KvgateError, match="give --target URL too"):
        plan("--policy", str(config), "--replica", "http://a:8000")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--target", "http://gw", "--replica", "http://a:1", "--kv-events", "tcp://a:5557"],
            "--kv-events read a single",
        ),
        (["--target", "http://gw", "--replica", "http://a:1", "--metrics-url", "http://a:1/m"], "--metrics-url read"),
        (["--target", "http://gw", "--replica", "a:8000"], "it starts with the replica's URL"),
        (["--target", "http://gw", "--replica", "http://a:1,metric=x"], "'metric=x' is not one of metrics=..."),
        (["--target", "http://gw", "--replica", "http://a:1", "--replica", "http://a:1"], "'a:1' is given twice"),
        (["--target", "http://gw", "--replica", "http://a:1,name=fleet"], "the name 'fleet' is the fleet's own"),
    ],
)
def test_a_bad_replica_is_refused_in_one_line_with_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert says in refused(capsys, monkeypatch, *argv)
