"""The harness's TTFT agrees with the engine's own per-request TTFT (DESIGN §7: within 10 ms at
P95): client rows joined to the engine's first_token events by engine request id."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.query import percentile
from tests.e2e.run_support import DEFAULT_CONFIG, kvgate_run, load_record, ttft_gaps_ms

pytestmark = pytest.mark.slow


def test_client_ttft_is_within_10_ms_of_the_engines_at_p95(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = kvgate_run("--policy", str(DEFAULT_CONFIG), "--profile", "quick", "--scenarios", "short_qa",
                        "--users", "4", "--duration", "8", "--out", str(run_dir))
    record = load_record(result, run_dir)
    gaps = ttft_gaps_ms(record)
    answered = record.requests["ttft_s"].notna().sum()
    assert len(gaps) == answered >= 30  # every answered request, baseline included, found its engine event
    assert percentile(gaps, 95) <= 10.0, gaps.describe()
