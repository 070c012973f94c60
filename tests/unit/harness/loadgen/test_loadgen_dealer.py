"""The master deals one schedule: each slot to exactly one sender, ahead of its time, and knows
what came back and what a lost sender took with it."""

from __future__ import annotations

from harness.loadgen.dealer import Dealer
from harness.loadgen.schedule import ChatText, Slot


def schedule(times: list[float]) -> list[Slot]:
    return [Slot(n, t, f"r-{n}", "s", "acme", 4, ChatText(8, f"r-{n}")) for n, t in enumerate(times)]


def test_slots_are_dealt_ahead_of_their_time_each_to_one_sender_in_turn() -> None:
    dealer = Dealer(schedule([0.0, 0.5, 0.5, 0.5, 3.0, 9.0]), lookahead_s=2.0)
    first = dealer.deal(0.0, ["w0", "w1"])
    assert {name: [s.index for s in slots] for name, slots in first.items()} == {"w0": [0, 2], "w1": [1, 3]}
    assert dealer.deal(0.5, ["w0", "w1"]) == {} and not dealer.is_exhausted  # 3.0 is not within 2 s yet
    assert [s.index for s in dealer.deal(1.5, ["w0", "w1"])["w0"]] == [4]
    assert [s.index for s in dealer.deal(7.5, ["w1"])["w1"]] == [5]
    assert dealer.is_exhausted and dealer.num_dealt == 6 and dealer.last_at_s == 9.0


def test_without_a_sender_nothing_is_dealt_and_nothing_is_lost() -> None:
    dealer = Dealer(schedule([0.0, 0.1]), lookahead_s=1.0)
    assert dealer.deal(0.0, []) == {} and dealer.num_dealt == 0
    assert sum(len(s) for s in dealer.deal(0.0, ["local"]).values()) == 2


def test_what_came_back_is_recorded_and_what_did_not_is_owed_by_its_sender() -> None:
    dealer = Dealer(schedule([0.0, 0.0, 0.0, 0.0, 0.0]), lookahead_s=1.0)
    dealer.deal(0.0, ["w0", "w1"])  # w0: 0, 2, 4; w1: 1, 3
    for request_id in ("r-0", "r-1", "r-3", "r-3", "other"):
        dealer.record(request_id)
    assert dealer.owed() == {"w0": [2, 4]} and dealer.num_owed == 2
    assert (dealer.num_duplicates, dealer.num_unscheduled) == (1, 1)
    summary = dealer.summary()
    assert summary["per_sender"] == {
        "w0": {"num_dealt": 3, "num_recorded": 1},
        "w1": {"num_dealt": 2, "num_recorded": 2},
    }
    assert summary["num_recorded"] == 3 and summary["owed"] == {"w0": [2, 4]}
