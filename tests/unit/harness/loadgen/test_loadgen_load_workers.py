"""The master's roll: a worker that runs another kvgate or other scenario files is refused with
both named; admitted workers are named, timed, and marked lost when they go."""

from __future__ import annotations

from pathlib import Path

from harness.loadgen.clock_sync import ClockSample
from harness.loadgen.load_workers import NUM_CLOCK_SAMPLES, Identity, LoadWorkers, identity_of, kvgate_version

MASTER = Identity("0.3.0", "aaaa")


def test_a_worker_that_runs_what_the_master_runs_is_admitted_and_named_by_its_index() -> None:
    roll = LoadWorkers(MASTER, expected=2)
    assert roll.admit("host_1", 1, Identity("0.3.0", "aaaa")) is None
    assert roll.name_of("host_1") == "w1" and roll.client_of("w1") == "host_1" and roll.is_admitted("host_1")


def test_another_kvgate_or_other_scenario_files_are_refused_naming_both() -> None:
    roll = LoadWorkers(MASTER, expected=1)
    older = roll.admit("host_a", 0, Identity("0.2.9", "aaaa"))
    assert older is not None and "kvgate 0.2.9" in older and "kvgate 0.3.0" in older
    other_files = roll.admit("host_b", 1, Identity("0.3.0", "bbbb"))
    assert other_files is not None and "scenario files bbbb" in other_files and "scenario files aaaa" in other_files
    assert not roll.workers and [r["client_id"] for r in roll.to_dict()["refused"]] == ["host_a", "host_b"]


def test_the_clock_is_settled_from_several_pings() -> None:
    roll = LoadWorkers(MASTER, expected=1)
    roll.admit("host_1", 0, MASTER)
    for n in range(NUM_CLOCK_SAMPLES):
        assert not roll.has_clock("host_1") and roll.offset_s("host_1") == 0.0
        roll.add_sample("host_1", ClockSample(10.0 * n, 10.0 * n + 2.001, 10.0 * n + 0.002))
    assert roll.has_clock("host_1") and abs(roll.offset_s("host_1") - 2.0) < 1e-9
    assert roll.to_dict()["workers"]["w0"]["clock_offset_ms"] == roll.offset_s("host_1") * 1000


def test_a_worker_that_goes_is_lost_once() -> None:
    roll = LoadWorkers(MASTER, expected=2)
    roll.admit("host_0", 0, MASTER)
    roll.admit("host_1", 1, MASTER)
    assert roll.mark_lost(["host_1", "stranger"]) == ["w1"] and roll.mark_lost(["host_1"]) == []
    assert [w.name for w in roll.live()] == ["w0"] and roll.to_dict()["workers"]["w1"]["lost"]


def test_a_run_without_workers_sends_from_its_own_process_on_its_own_clock() -> None:
    roll = LoadWorkers.alone(MASTER)
    assert roll.name_of("local") == "local" and roll.has_clock("local") and roll.offset_s("local") == 0.0


def test_the_scenario_digest_is_of_names_and_contents_not_directories(tmp_path: Path) -> None:
    here, there = tmp_path / "master", tmp_path / "downloaded"
    for d in (here, there):
        d.mkdir()
        (d / "short_qa.py").write_text("# the scenario\n")
    assert identity_of([str(here / "short_qa.py")]) == identity_of([str(there / "short_qa.py")])
    (there / "short_qa.py").write_text("# another scenario\n")
    assert identity_of([str(here / "short_qa.py")]).scenarios != identity_of([str(there / "short_qa.py")]).scenarios
    assert identity_of([]).kvgate == kvgate_version()
