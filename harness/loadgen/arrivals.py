"""When open-loop requests are meant to be sent: arrival schedules at a rate, seeded.

    Arrivals(kind=ArrivalKind.POISSON, rate_per_s=4.0, seed=7).times(duration_s=60)   # [0.21, 0.43, ...]

A closed loop (locust's users) sends the next request only when the last one came back, so a
slow server slows its own load down and hides how slow it is (coordinated omission). An open
loop sends on a schedule fixed in advance, whatever the server does: these are the schedules.

    constant  one request every 1/rate s, from 0
    poisson   independent arrivals: exponential gaps of mean 1/rate (the first after one gap)
    bursts    `burst_size` requests at the same instant, bursts arriving as a Poisson process
              of rate rate/burst_size: the same mean rate, delivered in clumps

Times are seconds since the load began, in [0, duration_s), ascending. The same kind, rate,
seed and burst size always give the same times (`random.Random(seed)`: no global state).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from record.errors import KvgateError, UnknownNameError


class ArrivalKind(str, Enum):
    CONSTANT = "constant"
    POISSON = "poisson"
    BURSTS = "bursts"


def arrival_kind(name: str) -> ArrivalKind:
    """The kind called `name`; the error lists the valid names."""
    try:
        return ArrivalKind(name)
    except ValueError:
        raise UnknownNameError("arrival process", name, [k.value for k in ArrivalKind]) from None


@dataclass(frozen=True, kw_only=True)
class Arrivals:
    """An arrival schedule: `rate_per_s` requests per second on average, of `kind`."""

    kind: ArrivalKind
    rate_per_s: float
    seed: int = 0
    burst_size: int = 8

    def __post_init__(self) -> None:
        if not (self.rate_per_s > 0 and math.isfinite(self.rate_per_s)):
            raise KvgateError(
                f"an arrival rate must be a positive number of requests per second, got {self.rate_per_s!r}"
            )
        if self.burst_size < 1:
            raise KvgateError(f"a burst holds at least 1 request, got {self.burst_size}")

    def times(self, *, duration_s: float, max_requests: int | None = None) -> Iterator[float]:
        """Intended send times in [0, duration_s), at most `max_requests` of them; lazily, so a
        long schedule costs nothing until it is read."""
        times = itertools.takewhile(lambda t: t < duration_s, self._unbounded())
        return itertools.islice(times, max_requests)

    def _unbounded(self) -> Iterator[float]:
        rng = random.Random(self.seed)
        if self.kind is ArrivalKind.CONSTANT:
            return (n / self.rate_per_s for n in itertools.count())
        if self.kind is ArrivalKind.POISSON:
            return itertools.accumulate(rng.expovariate(self.rate_per_s) for _ in itertools.count())
        starts = itertools.accumulate(rng.expovariate(self.rate_per_s / self.burst_size) for _ in itertools.count())
        return (t for start in starts for t in itertools.repeat(start, self.burst_size))

    def describe(self) -> dict[str, object]:
        """What meta.json says about the schedule."""
        out: dict[str, object] = {"kind": self.kind.value, "rate_per_s": self.rate_per_s, "seed": self.seed}
        if self.kind is ArrivalKind.BURSTS:
            out["burst_size"] = self.burst_size
        return out
