"""Client lag of an open-loop load, and the bound beyond which the load generator, not the
target, is what was measured.

Each open-loop request has an intended send time (its arrival) and an actual one; the lag is
actual − intended. A client that cannot keep its schedule (too few threads, a busy CPU, a
scheduler that overslept) sends later than intended, and a late request meets a server that
has had more time to drain: the latencies it measures are too kind, the same error a closed
loop makes (coordinated omission). So a run whose P99 lag is above `MAX_LAG_P99_MS` is a
harness error — the record is kept and not judged — never a verdict on the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from record.query import percentile

MAX_LAG_P99_MS = 50.0
"""The default bound on the P99 client lag: a small fraction of the 900 ms TTFT objective, and
an order of magnitude above what a thread pool that keeps up shows on a loaded 2-core machine."""


@dataclass(frozen=True)
class LagSummary:
    num_requests: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    num_late: int
    """Requests sent more than `bound_ms` after their intended time."""
    bound_ms: float

    @property
    def is_within(self) -> bool:
        return self.p99_ms <= self.bound_ms

    def explain(self) -> str:
        return (
            f"P99 client lag {self.p99_ms:.1f} ms (bound {self.bound_ms:.0f} ms), max {self.max_ms:.1f} ms; "
            f"{self.num_late} of {self.num_requests} requests sent more than {self.bound_ms:.0f} ms late"
        )

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize_lag(lags_s: Sequence[float], bound_ms: float = MAX_LAG_P99_MS) -> LagSummary:
    """The lag figures of one load (lags in seconds; percentiles by nearest rank, as every
    percentile kvgate shows); no request: no lag."""
    lags_ms = np.asarray(lags_s, dtype=float) * 1000.0
    if lags_ms.size == 0:
        return LagSummary(0, 0.0, 0.0, 0.0, 0, bound_ms)
    return LagSummary(
        num_requests=int(lags_ms.size),
        p50_ms=percentile(lags_ms, 50),
        p99_ms=percentile(lags_ms, 99),
        max_ms=float(lags_ms.max()),
        num_late=int((lags_ms > bound_ms).sum()),
        bound_ms=bound_ms,
    )
