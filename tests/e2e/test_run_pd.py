"""kvgate's own P/D pair, served and gated end to end: `kvgate run --policy configs/pd.toml` starts
the pair, reads each pool as a replica at its own path, disturbs the link (pd_transfer_chaos:
cancels timed to transfers, a slow link, failing transfers) beside the load, and judges each pool.
Counts and states, never timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates import Outcome, read_verdict
from record.fleet import PD_TARGET, replica_names
from tests.e2e.run_support import REPO, kvgate_run, load_record

pytestmark = pytest.mark.slow

PD_CONFIG = REPO / "configs" / "pd.toml"


def test_a_served_pair_is_read_and_judged_pool_by_pool(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    scenarios = "long_output,cancel_storm,short_qa,pd_transfer_chaos"
    args = ("--policy", str(PD_CONFIG), "--profile", "quick", "--duration", "8", "--scenarios", scenarios)
    record = load_record(kvgate_run(*args, "--out", str(run_dir)), run_dir)
    meta = record.meta
    assert meta.target["kind"] == PD_TARGET and replica_names(record) == ["prefill", "decode"]
    replicas = record.replicas.set_index("replica")
    assert replicas.loc["decode", "url"].endswith("/replicas/decode") and str(replicas.loc["decode", "worker"]) == "1"

    events = record.events
    assert set(events["worker"].dropna().astype(int)) == {0, 1}
    started = events[events["kind"] == "transfer_started"]
    assert len(started) and set(started["worker"].astype(int)) == {1}
    failed = events[events["kind"] == "transfer_failed"]
    assert (failed["reason"] == "cancelled").sum() > 0  # the chaos's cancels found transfers in flight
    pd = meta.final["pd"]
    assert pd["num_chaos_cancels"] > 0 and pd["stranded_reservation_blocks"] == pd["unresolved_transfers"] == 0
    assert (record.requests["status"] == "ok").sum() > 0
    assert (record.requests["error_code"] == "cancelled").sum() > 0  # what a client of a cancelled transfer got

    verdict = read_verdict(run_dir)
    for gate in ("cancel_release", "capacity_after_drain"):
        assert set(verdict.result(gate).evidence["replicas"]) == {"prefill", "decode"}, gate
    assert verdict.result("no_stranded_reservation").outcome is Outcome.PASS
    assert verdict.result("capacity_after_drain").outcome is Outcome.PASS
