"""`kvgate gate RUN_DIR`: exit codes 0 / 1 / 2 and the files it leaves beside the record."""

import json

import pytest

from gates import GATES
from harness.cli import main
from tests.fixtures.records import RecordBuilder


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_passing_run_exits_0_and_writes_the_verdict(tmp_path, capsys):
    run = RecordBuilder().healthy().routed_fleet().write(tmp_path / "run")
    assert main(["gate", str(run)]) == 0
    assert json.loads((run / "verdict.json").read_text())["outcome"] == "pass"
    assert (run / "verdict.junit.xml").exists()
    assert f"PASS: {len(GATES)} passed" in capsys.readouterr().out


def test_violation_exits_1(tmp_path):
    run = RecordBuilder().healthy().event("oom", 40.0, num_blocks=3).write(tmp_path / "run")
    assert main(["gate", str(run)]) == 1


def test_only_and_require(tmp_path):
    run = RecordBuilder().healthy().signals(tenant_samples=False).write(tmp_path / "run")
    assert main(["gate", str(run), "--only", "no_oom,tenant_share"]) == 0
    assert main(["gate", str(run), "--only", "no_oom", "--require", "tenant_share"]) == 1
    results = json.loads((run / "verdict.json").read_text())["results"]
    assert [r["gate"] for r in results] == ["no_oom", "tenant_share"]


def test_stricter_thresholds_file_turns_a_pass_into_a_violation(tmp_path):
    run = RecordBuilder().healthy().write(tmp_path / "run")
    strict = tmp_path / "strict.toml"
    strict.write_text("[slo]\nttft_ms = 100\n")
    assert main(["gate", str(run), "--gates", str(strict)]) == 1


def test_harness_errors_exit_2(tmp_path, capsys):
    assert main(["gate", str(tmp_path / "nowhere")]) == 2
    assert "not a run record" in capsys.readouterr().err
    run = RecordBuilder().healthy().write(tmp_path / "run")
    bad = tmp_path / "bad.toml"
    bad.write_text("[no_oom]\nmax_ooms = 1\n")
    assert main(["gate", str(run), "--gates", str(bad)]) == 2
    assert "valid: max_gpu_mem_fraction, max_oom" in capsys.readouterr().err
    assert main(["gate", str(run), "--only", "nope"]) == 2


def test_record_with_no_measurable_signal_exits_2(tmp_path, capsys):
    builder = RecordBuilder().signals(
        client_requests=False, engine_events=False, engine_samples=False, tenant_samples=False, gpu_memory=False
    )
    assert main(["gate", str(builder.write(tmp_path / "run"))]) == 2
    assert "no gate could be measured" in capsys.readouterr().err


def test_a_run_that_ended_early_is_never_judged_so_never_passed(tmp_path, capsys):
    # the healthy record would pass: only the note that the run was interrupted stops it
    run = RecordBuilder().healthy().meta(notes=["run ended early: KeyboardInterrupt: signal 2"]).write(tmp_path / "run")
    assert main(["gate", str(run)]) == 2 and not (run / "verdict.json").exists()
    [line] = capsys.readouterr().err.splitlines()
    assert "not judged, the record is partial (run ended early: KeyboardInterrupt" in line
