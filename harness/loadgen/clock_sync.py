"""A locust worker's clock offset to the master, measured as NTP does, over locust's own messages.

    offset = estimate_offset([ClockSample(t0, t1, t2), ...])   # offset.offset_s: worker − master

The master sends a ping at t0 (its clock), the worker answers with its time t1, the answer
arrives at t2 (the master's clock again). If the two legs took equally long, the worker read its
clock at the master's (t0 + t2) / 2, so its offset is t1 − (t0 + t2) / 2; however unequal the
legs, the true offset lies within half the round trip t2 − t0 of that. Of several pings the one
with the shortest round trip is kept: its bound is the tightest, and a ping held up by a busy
event loop on either side only ever lengthens the round trip.

The offset puts a worker's rows on the master's time axis (loadgen/outcome.py `on_master`) and its
schedule on the worker's (a slot due at the master's T is due at T + offset there). A client
lag is measured on one clock, the sender's, so the offset never enters it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClockSample:
    sent_s: float
    """t0: the master's clock when it sent the ping."""
    answered_s: float
    """t1: the worker's clock when it answered."""
    received_s: float
    """t2: the master's clock when the answer arrived."""

    @property
    def round_trip_s(self) -> float:
        return self.received_s - self.sent_s

    @property
    def offset_s(self) -> float:
        return self.answered_s - (self.sent_s + self.received_s) / 2


@dataclass(frozen=True, slots=True)
class ClockOffset:
    offset_s: float
    """The worker's clock minus the master's."""
    round_trip_s: float
    """Of the ping it comes from: the offset is exact to within half of it."""
    num_samples: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "clock_offset_ms": self.offset_s * 1000.0,
            "clock_round_trip_ms": self.round_trip_s * 1000.0,
            "clock_samples": self.num_samples,
        }


SAME_CLOCK = ClockOffset(0.0, 0.0, 0)
"""A sender in the master's own process (a run without workers)."""


def estimate_offset(samples: Sequence[ClockSample]) -> ClockOffset:
    """The offset of the sample with the shortest round trip (module docstring)."""
    if not samples:
        raise ValueError("no clock sample to estimate from")
    best = min(samples, key=lambda s: s.round_trip_s)
    return ClockOffset(best.offset_s, best.round_trip_s, len(samples))
