"""A run stopped from outside (SIGTERM as CI sends it; Ctrl-C alike) stops locust and the engine
it started, keeps what it measured (meta.json says how the run ended) and exits 2; `kvgate gate`
then refuses to judge the partial record."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness.cli import main
from tests.e2e.run_support import DEFAULT_CONFIG, REPO, clean_env

pytestmark = pytest.mark.slow


def test_sigterm_during_the_load_cleans_up_and_keeps_the_record(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--policy",
            str(DEFAULT_CONFIG),
            "--profile",
            "quick",
            "--scenarios",
            "short_qa",
            "--duration",
            "60",
            "--out",
            str(run_dir),
        ],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip().startswith("load:"):
            break
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, "".join(lines) + out
    assert "interrupted" in out
    meta = json.loads((run_dir / "meta.json").read_text())
    assert any(note.startswith("run ended early: KeyboardInterrupt") for note in meta["notes"])
    assert [p["name"] for p in meta["phases"]] == ["baseline"]
    with pytest.raises(httpx.ConnectError):  # the engine this run started is gone
        httpx.get(meta["target"]["url"] + "/health", timeout=5)
    assert main(["gate", str(run_dir)]) == 2 and not (run_dir / "verdict.json").exists()  # never judged, never PASS
