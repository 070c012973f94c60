from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.loadgen.chaos import KillRefused, WorkerInfo, choose_victim, is_engine_worker, is_loopback, parse_workers


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://localhost:1", True),
        ("http://[::1]:8000", True),
        ("http://10.0.0.5:8000", False),
        ("https://api.example.com", False),
    ],
)
def test_only_loopback_targets_are_ours(url: str, expected: bool) -> None:
    assert is_loopback(url) is expected


def fake_proc(tmp_path: Path, pids: dict[int, bytes]) -> Path:
    for pid, cmdline in pids.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(cmdline)
    return tmp_path


def test_a_worker_is_recognised_by_its_command_line(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {11: b"python\0-m\0reference_engine.server.worker\0--fd\0", 12: b"bash\0"})
    assert is_engine_worker(11, proc) and not is_engine_worker(12, proc) and not is_engine_worker(13, proc)


def test_a_non_loopback_target_is_refused_for_good() -> None:
    with pytest.raises(KillRefused) as refused:
        choose_victim("http://10.1.1.1:8000", [WorkerInfo(0, 1, "ready"), WorkerInfo(1, 2, "ready")], 0)
    assert refused.value.permanent


def test_a_single_engine_is_never_killed() -> None:
    workers = parse_workers({"workers": [{"worker": None, "pid": os.getpid(), "state": "ready"}]})
    with pytest.raises(KillRefused, match="several workers") as refused:
        choose_victim("http://127.0.0.1:8000", workers, 0)
    assert refused.value.permanent


def test_with_fewer_than_two_ready_workers_it_waits_for_the_next_turn() -> None:
    workers = [WorkerInfo(0, os.getpid(), "ready"), WorkerInfo(1, None, "starting")]  # our pid is no engine worker
    with pytest.raises(KillRefused, match="ready") as refused:
        choose_victim("http://127.0.0.1:8000", workers, 0)
    assert not refused.value.permanent
