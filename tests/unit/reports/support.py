"""Helpers of the report tests: records with their pressure summary, as every run now writes them."""

from __future__ import annotations

from pathlib import Path

from record.pressure import record_pressure
from record.run_record import RunRecord
from tests.fixtures.records import RecordBuilder


def with_pressure(builder: RecordBuilder, run_dir: Path) -> RunRecord:
    """The built record with its pressure summary stored, as every run writes it."""
    record_pressure(builder.write(run_dir))
    return RunRecord.load(run_dir)


def pressed(builder: RecordBuilder) -> RecordBuilder:
    """The healthy run, with usage reaching the preempt rung at 42 s for 3 s."""
    return builder.event("watermark", 42.0, reason="preempt", usage=0.93).event(
        "watermark", 45.0, reason="evict", usage=0.86
    )
