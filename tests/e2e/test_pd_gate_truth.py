"""Gate truth for a P/D pair (docs/pd.md): each broken P/D config fails the gates its leak must
fail, judged on both pools, and configs/pd.toml passes them under the same chaos (a slow link
whose transfers sometimes fail, every fourth transfer cancelled as it starts). Replayed on a
virtual clock: a few seconds for all of them."""

from __future__ import annotations

import pytest

from gates import Outcome
from record.fleet import replica_view
from record.pressure import measure_pressure
from tests.e2e.gate_truth_support import PD_CONFIG, PD_TRUTH, RunCache, Truth, config_changes
from tests.e2e.test_gate_truth import assert_fails_on_its_broken_config, assert_passes_on_its_healthy_config


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> RunCache:
    return RunCache(tmp_path_factory.mktemp("pd-gate-truth"))


@pytest.mark.parametrize("truth", PD_TRUTH, ids=lambda t: f"{t.broken.stem}-{t.gate}")
def test_a_broken_pd_config_fails_the_gate_of_its_leak(runs: RunCache, truth: Truth) -> None:
    assert len(config_changes(truth.broken, truth.built_on)) == 1  # pd.toml with one change
    assert_fails_on_its_broken_config(runs, truth)


@pytest.mark.parametrize("truth", PD_TRUTH, ids=lambda t: f"{t.broken.stem}-{t.gate}")
def test_the_healthy_pd_config_passes_the_same_gate(runs: RunCache, truth: Truth) -> None:
    assert_passes_on_its_healthy_config(runs, truth)


def test_the_healthy_pair_was_pressed_on_both_pools_and_its_cancels_landed_mid_transfer(runs: RunCache) -> None:
    record, verdict = runs.get(PD_CONFIG, "pd_transfer_chaos")
    pd = record.meta.final["pd"]
    assert pd["num_failed"] > 0 and pd["num_fallbacks"] == pd["num_failed"] + pd["num_timed_out"]
    assert pd["stranded_reservation_blocks"] == pd["unresolved_transfers"] == 0
    failed = record.events[record.events["kind"] == "transfer_failed"]
    assert (failed["reason"] == "cancelled").sum() > 0  # the chaos's cancels found their transfers in flight
    result = verdict.result("cancel_release")
    assert result.outcome is Outcome.PASS and set(result.evidence["replicas"]) == {"prefill", "decode"}
    reached = {name: measure_pressure(replica_view(record, name)) for name in ("prefill", "decode")}
    assert reached["prefill"].reached("warn") and reached["decode"].reached("evict")
