"""`kvgate matrix`'s exit code: candidates decide it, and none may fall below the best baseline's
goodput (gates/comparison.py has the rule; test_gate_comparison.py tests it)."""

from pathlib import Path

from harness.cli import EXIT_GATE_FAILED, EXIT_OK
from harness.commands.matrix import Entry, _exit_code
from harness.judge import judge
from tests.fixtures.records import RecordBuilder


def test_a_passing_candidate_below_the_best_baselines_goodput_fails_the_matrix(tmp_path: Path) -> None:
    passing = judge(RecordBuilder().healthy().write(tmp_path / "candidate"), outputs=("json",))
    judged = [(Entry(Path("configs/h2o.toml"), "h2o", baseline=False), passing)]
    assert _exit_code(judged, [], below_baseline=False) == EXIT_OK
    assert _exit_code(judged, [], below_baseline=True) == EXIT_GATE_FAILED
