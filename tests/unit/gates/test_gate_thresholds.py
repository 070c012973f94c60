import pytest

from gates import GATES, load_thresholds, slo
from record.errors import ConfigError, UnknownNameError


def test_defaults_cover_every_metric_of_every_gate():
    thresholds = load_thresholds()
    assert set(thresholds.limits) == {*GATES, slo.TABLE}
    shared = {slo.TTFT_MS, slo.CRITICAL_MAX_PROMPT_TOKENS}
    for name, gate in GATES.items():
        assert set(thresholds.for_gate(name)) == set(gate.metrics) | shared


def test_design_defaults():
    t = load_thresholds()
    assert t.for_gate("cancel_release")["p99_max_s"] == 2.0
    assert t.for_gate("interactive_ttft")[slo.TTFT_MS] == 900
    assert t.for_gate("preempted_complete")["min_completed_fraction"] == 0.99
    assert t.for_gate("eviction_thrash")["max_unforced_evicted_fraction_per_s"] == 0.01
    assert t.for_gate("goodput")["min_fraction"] == 0.4
    assert t.for_gate("approximate_answers")["max_critical_fraction"] == 0
    assert t.for_gate("recompute_tax")["max_fraction"] == 0.1
    assert t.for_gate("capacity_after_drain") == {
        "max_lost_blocks": 0,
        "max_lost_slots": 0,
        slo.TTFT_MS: 900,
        slo.CRITICAL_MAX_PROMPT_TOKENS: 4096,
    }


def test_user_file_overrides_key_by_key(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[interactive_ttft]\nmax_degradation = 5\n")
    t = load_thresholds(path)
    assert t.for_gate("interactive_ttft") == {
        "max_degradation": 5.0,
        slo.TTFT_MS: 900.0,
        slo.CRITICAL_MAX_PROMPT_TOKENS: 4096.0,
    }
    assert t.source == str(path)


def test_the_shared_objective_is_stated_once_and_read_by_every_gate(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[slo]\nttft_ms = 500\n")
    t = load_thresholds(path)
    assert {t.for_gate(name)[slo.TTFT_MS] for name in GATES} == {500.0}
    assert all(slo.TTFT_MS.split(".")[1] not in gate.metrics for gate in GATES.values())


def test_an_unknown_key_of_the_shared_objective_is_an_error(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[slo]\np95_max_ms = 500\n")
    with pytest.raises(UnknownNameError, match="ttft_ms"):
        load_thresholds(path)


def test_unknown_gate_is_an_error_listing_the_gates(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[no_ooom]\nmax_oom = 1\n")
    with pytest.raises(UnknownNameError, match="no_oom") as err:
        load_thresholds(path)
    assert err.value.valid == sorted([*GATES, slo.TABLE, "regression"])


def test_unknown_metric_is_an_error_listing_the_metrics(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[cancel_release]\np99_s = 1\n")
    with pytest.raises(UnknownNameError, match="p99_max_s"):
        load_thresholds(path)


@pytest.mark.parametrize(
    "text", ['[no_oom]\nmax_oom = "zero"\n', "[no_oom]\nmax_oom = true\n", "no_oom = 1\n", "[no_oom\n"]
)
def test_malformed_file_is_a_config_error(tmp_path, text):
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        load_thresholds(path)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_thresholds(tmp_path / "absent.toml")
