"""Usage samples from /admin/snapshot: one samples.csv row and one tenant_samples.csv row per
configured tenant, the same columns replay writes (both: harness/sample_rows.py).

A multi-worker engine answers with the sums over its workers (one pool's view of several).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness import sample_rows
from harness.collectors.admin import run_time
from harness.sample_rows import pool_state, tenant_rows

__all__ = ["in_flight", "pool_state", "sample_row", "tenant_rows"]


def sample_row(snap: Mapping[str, Any], started_unix: float) -> dict[str, Any]:
    return sample_rows.sample_row(snap, run_time(snap["t_s"], snap, started_unix))


def in_flight(snap: Mapping[str, Any]) -> int:
    """Requests the engine still holds (running, waiting, swapped), plus router reservations."""
    return snap["num_running"] + snap["num_waiting"] + snap["num_swapped"] + int(snap.get("num_reservations", 0))
