"""Multi-turn sessions whose KV expires between turns: a session that cannot be rebuilt gets
410 context_expired (recorded with its code, then a new session starts); a rebuildable one is
re-prefilled and says so (session_rebuilt)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.target import ReferenceEngine
from tests.e2e.run_support import DEFAULT_CONFIG, SCENARIOS, locust

pytestmark = pytest.mark.slow


def test_expired_sessions_are_recorded_as_410_or_as_rebuilt(tmp_path: Path) -> None:
    config = tmp_path / "short_idle.toml"
    config.write_text(
        DEFAULT_CONFIG.read_text().replace("max_session_idle_seconds = 120", "max_session_idle_seconds = 0.5")
    )
    rows_path = tmp_path / "requests.csv"
    with ReferenceEngine(config, log_path=tmp_path / "engine.log") as engine:
        result = locust(
            "-f",
            str(SCENARIOS / "multi_turn.py"),
            "--headless",
            "-u",
            "8",
            "-r",
            "8",
            "-t",
            "8s",
            "--host",
            engine.url,
            "--only-summary",
            "--exit-code-on-error",
            "0",
            "--kvgate-requests-csv",
            str(rows_path),
            "--kvgate-idle-gap-min-s",
            "1",
            "--kvgate-idle-gap-max-s",
            "1.5",
            "--kvgate-turns",
            "3",
        )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = pd.read_csv(rows_path, dtype={"session_id": str, "error_code": str})
    assert rows["session_id"].notna().all()
    expired = rows[rows["http_status"] == 410]
    assert len(expired) and set(expired["error_code"]) == {"context_expired"} and (expired["status"] == "error").all()
    assert rows.loc[rows["status"] == "ok", "session_rebuilt"].any()
    assert "410 context_expired" in result.stderr
