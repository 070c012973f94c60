"""samples.csv and tenant_samples.csv rows from the engine's usage snapshot (the columns:
harness/sample_rows.py, shared with live runs).

Replay samples at a fixed virtual interval. The engine's state changes only at step boundaries,
so the sample stamped T shows the engine at the first step boundary at or after T (before the
arrivals due at that boundary are added); while the engine is idle nothing changes and the
samples of the idle gap all show the same state. This is the same in event-driven and
step-by-step replay, so both write identical samples.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness import sample_rows
from reference_engine.core.snapshot import UsageSnapshot


def sample_row(snap: UsageSnapshot, t_s: float) -> dict:
    return sample_rows.sample_row(sample_rows.Fields(snap), t_s)


def tenant_rows(snap: UsageSnapshot, t_s: float, caps: Mapping[str, float]) -> list[dict]:
    """One row per configured tenant (zero blocks included), with its hard cap."""
    return sample_rows.tenant_rows(sample_rows.Fields(snap), t_s, caps)
