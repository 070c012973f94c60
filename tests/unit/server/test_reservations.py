"""The router's reservation ledger: one reservation per request, none left on a dead worker."""

import pytest

from record.events import EventKind
from reference_engine.clock import VirtualClock
from reference_engine.server.merged_events import MERGED_COLUMNS, MergedEventLog
from reference_engine.server.reservations import ReservationLedger


def make_ledger() -> tuple[ReservationLedger, MergedEventLog]:
    events = MergedEventLog()
    return ReservationLedger(VirtualClock(), events, num_workers=2), events


def test_load_follows_reservations_and_release_is_idempotent():
    ledger, events = make_ledger()
    ledger.reserve("a", 0, 10, "acme")
    ledger.reserve("b", 0, 5, "acme")
    ledger.reserve("c", 1, 7, None)
    assert ledger.reserved_blocks == [15, 7] and ledger.num_requests(0) == 2
    assert ledger.release("a", "finished").num_blocks == 10
    assert ledger.release("a", "finished") is None
    assert ledger.reserved_blocks == [5, 7] and len(events.log) == 1


def test_a_request_never_holds_two_reservations():
    ledger, _ = make_ledger()
    ledger.reserve("a", 0, 10, "acme")
    with pytest.raises(AssertionError, match="already holds"):
        ledger.reserve("a", 1, 10, "acme")
    ledger.release("a", "worker_lost")  # a retry releases first, then reserves elsewhere
    ledger.reserve("a", 1, 10, "acme")
    assert ledger.get("a").worker == 1


def test_a_dead_worker_loses_every_reservation_with_events():
    ledger, events = make_ledger()
    for i in range(3):
        ledger.reserve(f"r{i}", 0, 4, "acme")
    ledger.reserve("other", 1, 4, "acme")
    released = ledger.release_worker(0, "killed by SIGKILL")
    assert sorted(r.request_id for r in released) == ["r0", "r1", "r2"]
    assert ledger.reserved_blocks == [0, 4] and ledger.get("other") is not None
    rows, _, _ = events.page(0, 100)
    kinds = [row[2] for row in rows]
    assert kinds == [EventKind.WORKER_DIED.value] + [EventKind.RESERVATION_RELEASED.value] * 3
    assert all(row[-1] == 0 for row in rows) and rows[0][MERGED_COLUMNS.index("reason")] == "killed by SIGKILL"
    assert {row[MERGED_COLUMNS.index("reason")] for row in rows[1:]} == {"worker_lost"}


def test_the_broken_router_keeps_a_dead_worker_s_reservations_where_nothing_frees_them():
    # server.release_reservations_on_worker_loss = false: the target the no_orphans gate must catch
    events = MergedEventLog()
    ledger = ReservationLedger(VirtualClock(), events, num_workers=2, release_on_worker_loss=False)
    ledger.reserve("r0", 0, 4, "acme")
    ledger.reserve("other", 1, 4, "acme")
    assert ledger.release_worker(0, "killed by SIGKILL") == []
    assert ledger.release("r0", "worker_lost") is None  # the request's own release finds nothing
    ledger.reserve("r0", 1, 4, "acme")  # a retry elsewhere is not refused
    assert len(ledger) == 3 and ledger.reserved_blocks == [4, 8]
    assert {r["request_id"] for r in ledger.rows()} == {"r0", "other"} and len(ledger.rows()) == 3
    rows, _, _ = events.page(0, 100)
    assert [row[2] for row in rows] == [EventKind.WORKER_DIED.value]  # no reservation_released
