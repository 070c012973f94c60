"""Gate truth: every gate FAILS on a configuration built to break it and PASSES on
default.toml under the same scenario, so no gate is one that cannot fail.

The broken configs are `configs/broken/<gate>.toml`, each default.toml with one change; the
scenarios and runs are in gate_truth_support.py. Replay scenarios run in seconds on a virtual
clock; live ones (cancels, client timeouts, a cooldown after clients left, worker kill -9) are
short, bounded `kvgate run`s on loopback, marked slow. Each healthy default run is made once per
scenario and shared by every gate it proves. docs/gates.md has the table.
"""

from __future__ import annotations

import pytest

from gates import GATES, Outcome
from reference_engine import load_config
from tests.e2e.gate_truth_support import (
    DEFAULT_CONFIG,
    GATE_TRUTH,
    LIVE_SCENARIOS,
    MORE_TRUTH,
    REPLAY_SCENARIOS,
    REPO,
    RunCache,
    Truth,
    config_changes,
)

REPLAYED = [t for t in GATE_TRUTH.values() if not t.is_live]
LIVE = [t for t in (*GATE_TRUTH.values(), *MORE_TRUTH) if t.is_live]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> RunCache:
    return RunCache(tmp_path_factory.mktemp("gate-truth"))


def test_every_gate_has_a_broken_config_and_a_scenario() -> None:
    assert set(GATE_TRUTH) == set(GATES), "a gate without gate truth can never be shown to fail"
    for truth in GATE_TRUTH.values():
        assert truth.scenario in REPLAY_SCENARIOS or truth.scenario in LIVE_SCENARIOS
        header = truth.broken.read_text().splitlines()[0]
        assert header.startswith("# BROKEN ON PURPOSE") and f"`{truth.gate}`" in header


@pytest.mark.parametrize("gate", sorted(GATE_TRUTH))
def test_a_broken_config_is_default_with_one_change(gate: str) -> None:
    changes = config_changes(GATE_TRUTH[gate].broken, GATE_TRUTH[gate].built_on)
    tables = {key.rsplit(".", 1)[0] for key in changes}
    # one mechanism: one key, or two keys of one table (batch_progress: aging and the batch share),
    # or one key set alike in every tenant of default.toml (goodput, rejections: every cap)
    every_tenant = {f"tenants.{name}" for name in load_config(DEFAULT_CONFIG).tenants}
    alike = len({key.rsplit(".", 1)[1] for key in changes}) == 1 and len(set(map(str, changes.values()))) == 1
    assert changes and ((len(tables) == 1 and len(changes) <= 2) or (tables == every_tenant and alike)), changes


def assert_fails_on_its_broken_config(runs: RunCache, truth: Truth) -> None:
    record, verdict = runs.get(truth.broken, truth.scenario)
    result = verdict.result(truth.gate)
    assert result.outcome is Outcome.FAIL, f"{truth.gate} did not fail on {truth.broken.name}: {result.explanation}"
    assert record.meta.config_digest in result.explanation  # the rollback handle


def assert_passes_on_its_healthy_config(runs: RunCache, truth: Truth) -> None:
    _, verdict = runs.get(truth.healthy, truth.scenario)
    result = verdict.result(truth.gate)
    where = f"{truth.healthy.name} ({truth.scenario})"
    assert result.outcome is Outcome.PASS, f"{truth.gate} on {where}: {result.explanation}"


@pytest.mark.parametrize("truth", REPLAYED, ids=lambda t: t.gate)
def test_a_gate_fails_on_the_config_built_to_break_it(runs: RunCache, truth: Truth) -> None:
    assert_fails_on_its_broken_config(runs, truth)


@pytest.mark.parametrize("truth", REPLAYED, ids=lambda t: t.gate)
def test_a_gate_passes_on_the_default_config_under_the_same_load(runs: RunCache, truth: Truth) -> None:
    assert_passes_on_its_healthy_config(runs, truth)


@pytest.mark.slow
@pytest.mark.parametrize("truth", LIVE, ids=lambda t: t.broken.stem)
def test_a_live_gate_fails_on_the_config_built_to_break_it(runs: RunCache, truth: Truth) -> None:
    assert_fails_on_its_broken_config(runs, truth)


@pytest.mark.slow
@pytest.mark.parametrize("truth", LIVE, ids=lambda t: t.broken.stem)
def test_a_live_gate_passes_on_the_default_config_under_the_same_load(runs: RunCache, truth: Truth) -> None:
    assert_passes_on_its_healthy_config(runs, truth)


@pytest.mark.parametrize("policy", ["streamingllm", "h2o"])
def test_the_shipped_approximate_policies_keep_critical_chat_exact(runs: RunCache, policy: str) -> None:
    """configs/streamingllm.toml and h2o.toml as shipped compress only beyond a critical chat's
    size: the chat questions the broken config answers from dropped KV stay exact under them."""
    _, verdict = runs.get(REPO / "configs" / f"{policy}.toml", GATE_TRUTH["approximate_answers"].scenario)
    result = verdict.result("approximate_answers")
    assert result.outcome is Outcome.PASS and result.evidence["critical"]["num_approximate"] == 0


@pytest.mark.slow
def test_prefix_timing_is_not_measurable_without_a_prefix_cache(runs: RunCache) -> None:
    """No cache: the same tenant's repeats answer no sooner than fresh prompts, so nothing can be
    told of another tenant: not measurable, never a pass."""
    _, verdict = runs.get(DEFAULT_CONFIG, "timing_probe_uncached")
    result = verdict.result("prefix_timing")
    assert result.outcome is Outcome.NOT_MEASURABLE, result.explanation
    assert "isolation cannot be told" in result.explanation
