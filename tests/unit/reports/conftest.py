"""Fixtures for report tests: built records with their verdicts."""

from __future__ import annotations

import pytest

from gates import evaluate
from tests.fixtures.records import RecordBuilder


@pytest.fixture
def healthy_run(tmp_path):
    record = RecordBuilder().healthy().build(tmp_path / "healthy")
    return record, evaluate(record)


@pytest.fixture
def failing_run(tmp_path):
    builder = RecordBuilder(run_id="run-none", policy="none").healthy()
    builder.event("oom", 40.0, num_blocks=3).tenant_sample(42.0, "globex", 180)
    builder.request("hung", sent_s=50, ttft_s=None, e2e_s=None, status="timeout")
    record = builder.build(tmp_path / "failing")
    return record, evaluate(record)
