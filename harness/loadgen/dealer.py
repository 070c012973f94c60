"""The master's side of an open loop: one schedule dealt to the senders, each slot to exactly one.

    dealer = Dealer(workload.slots(settings, tenants, duration_s), lookahead_s=2.0)
    for sender, slots in dealer.deal(elapsed_s, ["w0", "w1"]).items():
        ...send them to that locust worker...
    dealer.record(row_request_id)                 # a row came back
    dealer.owed()                                 # {sender: [indices dealt and never recorded]}

Why the master deals, ahead of time, rather than each worker computing its share (say every
index i ≡ k mod n): only the master needs the trace file and the seed; a worker needs to know
nothing of the others (how many there are, its own number, whether one joined late); a worker
lost mid-run takes with it only what it had been dealt, and the master knows exactly what that
was; and the schedule is made once, in one process, so "each request sent once" is a property
of one data structure, checked as rows come back. The cost is one locust message per sender per
deal (a few per second, each a list of small `Slot`s), sent `lookahead_s` before the slots are
due so that the message's own latency never delays a send.

Slots go round-robin over the senders live at each deal, so a burst of requests at one instant
is split evenly. A slot is dealt once and never again, even when its sender is lost: whether a
lost worker sent a request before it went is unknowable here, and sending it twice would break
the schedule the other way. What was dealt and never came back is `owed`, named per sender.

Invariants: `_head` is the earliest slot not yet dealt; every dealt request id is in `_sender_of`
and, until its first row, in its sender's `_owed`. `deal` costs O(slots dealt + senders), `record`
O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from harness.loadgen.schedule import Slot


class Dealer:
    def __init__(self, slots: Iterable[Slot], *, lookahead_s: float) -> None:
        self._pending = iter(slots)
        self._head: Slot | None = next(self._pending, None)
        self._lookahead_s = lookahead_s
        self._turn = 0
        self._sender_of: dict[str, str] = {}
        self._owed: dict[str, dict[str, int]] = {}
        self._num_dealt: dict[str, int] = {}
        self._num_recorded: dict[str, int] = {}
        self.num_duplicates = 0
        """Rows of a request already recorded (a request sent twice): 0 unless something is wrong."""
        self.num_unscheduled = 0
        """Rows of no dealt request (another load's rows, in a process that records both)."""
        self.last_at_s = 0.0
        """When the last slot dealt so far is due."""

    @property
    def is_exhausted(self) -> bool:
        """Every slot of the schedule has been dealt."""
        return self._head is None

    @property
    def num_dealt(self) -> int:
        return len(self._sender_of)

    @property
    def num_owed(self) -> int:
        return sum(len(owed) for owed in self._owed.values())

    def deal(self, elapsed_s: float, senders: Sequence[str]) -> dict[str, list[Slot]]:
        """The slots due before `elapsed_s` + lookahead, each given to one of `senders` in turn
        (none when there is no sender: they wait for the next deal)."""
        dealt: dict[str, list[Slot]] = {}
        while senders and self._head is not None and self._head.at_s < elapsed_s + self._lookahead_s:
            slot, sender = self._head, senders[self._turn % len(senders)]
            self._turn += 1
            dealt.setdefault(sender, []).append(slot)
            self._sender_of[slot.request_id] = sender
            self._owed.setdefault(sender, {})[slot.request_id] = slot.index
            self._num_dealt[sender] = self._num_dealt.get(sender, 0) + 1
            self.last_at_s = slot.at_s
            self._head = next(self._pending, None)
        return dealt

    def record(self, request_id: str) -> None:
        """A row of `request_id` came back."""
        sender = self._sender_of.get(request_id)
        if sender is None:
            self.num_unscheduled += 1
        elif self._owed[sender].pop(request_id, None) is None:
            self.num_duplicates += 1
        else:
            self._num_recorded[sender] = self._num_recorded.get(sender, 0) + 1

    def owed(self) -> dict[str, list[int]]:
        """{sender: schedule indices dealt to it that have no row}, senders that owe nothing left out."""
        return {sender: sorted(owed.values()) for sender, owed in self._owed.items() if owed}

    def summary(self) -> dict[str, Any]:
        """What the master reports about the schedule (load.json's `schedule`)."""
        return {
            "num_dealt": self.num_dealt,
            "is_exhausted": self.is_exhausted,
            "num_recorded": sum(self._num_recorded.values()),
            "num_duplicates": self.num_duplicates,
            "per_sender": {
                sender: {"num_dealt": n, "num_recorded": self._num_recorded.get(sender, 0)}
                for sender, n in sorted(self._num_dealt.items())
            },
            "owed": self.owed(),
        }
