"""Fixtures for gate tests: `judge(builder, gate, **limits)` runs one gate on a built record."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from gates import GateResult, get_gate, load_thresholds
from tests.fixtures.records import RecordBuilder

Judge = Callable[..., GateResult]


@pytest.fixture
def judge(tmp_path) -> Judge:
    runs = itertools.count()

    def _judge(builder: RecordBuilder, gate: str, **limits: float) -> GateResult:
        record = builder.build(tmp_path / f"run-{next(runs)}")
        return get_gate(gate).evaluate(record, {**load_thresholds().for_gate(gate), **limits})

    return _judge


@pytest.fixture
def healthy() -> RecordBuilder:
    return RecordBuilder().healthy()
