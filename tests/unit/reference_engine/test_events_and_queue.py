from dataclasses import asdict

from record.events import EVENT_COLUMNS, EventKind
from reference_engine.config import TrafficClass
from reference_engine.core.event_log import EventLog
from reference_engine.core.waiting_queue import WaitingQueue
from reference_engine.request import Request


def test_event_cursor_pages_and_reports_missed_events():
    log = EventLog(capacity=3)
    for i in range(5):
        log.emit(float(i), EventKind.ADMITTED, request_id=str(i))
    page = log.since(0)
    assert [e.request_id for e in page.events] == ["2", "3", "4"] and page.missed == 2 and page.next_cursor == 5
    assert log.since(4, limit=10).events[0].seq == 4
    assert log.since(5).events == []


def test_event_rows_are_the_dataclass_fields_in_column_order_with_the_kind_as_text():
    log = EventLog()
    bare = log.emit(1.5, EventKind.WATERMARK, reason="warn", usage=0.9)
    full = log.emit(
        2.0,
        EventKind.PREEMPTED,
        request_id="r",
        tenant="t",
        traffic_class="batch",
        num_blocks=3,
        num_tokens=4,
        latency_s=0.5,
        deadline_s=9.0,
        tenant_live_blocks=7,
        num_bytes=4096,
        usage=1.0,
        reason="capacity",
        mode="swap",
        client_request_id="c",
    )
    for e in (bare, full):
        row = e.to_row()
        assert tuple(row) == EVENT_COLUMNS and row == {**asdict(e), "kind": e.kind.value}
        assert type(row["kind"]) is str


def req(i, cls, arrival=0.0):
    return Request(
        request_id=str(i),
        tenant="t",
        traffic_class=cls,
        num_prompt_tokens=1,
        max_new_tokens=1,
        arrival_s=arrival,
        seq_no=i,
    )


def test_higher_class_first_then_aging_lets_batch_through():
    q = WaitingQueue(aging_s=10, fcfs=False)
    b = req(0, TrafficClass.BATCH, arrival=0.0)
    i = req(1, TrafficClass.INTERACTIVE, arrival=12.0)
    q.enqueue(b)
    q.enqueue(i)
    # effective priority at 12.5 s: batch 0 + 12.5/10 = 1.25 > interactive 1 + 0.5/10 = 1.05

    assert next(q.drain_in_order(now_s=12.5)) is b
    q.push(b)
    # a batch request that waited less than aging_s longer does not overtake
    late_batch = WaitingQueue(aging_s=10, fcfs=False)
    late_batch.enqueue(req(2, TrafficClass.BATCH, arrival=10.0))
    late_batch.enqueue(req(3, TrafficClass.INTERACTIVE, arrival=12.0))
    assert next(late_batch.drain_in_order(now_s=12.5)).request_id == "3"


def test_preempted_request_keeps_its_place():
    q = WaitingQueue(aging_s=10, fcfs=True)
    old, new = req(1, TrafficClass.INTERACTIVE), req(2, TrafficClass.INTERACTIVE)
    q.enqueue(new)
    q.push(old)  # re-queued after a preemption, arrived first
    assert [r.request_id for r in q.drain_in_order(0.0)] == ["1", "2"]


def test_paused_class_is_skipped():
    q = WaitingQueue(aging_s=10, fcfs=False)
    q.enqueue(req(0, TrafficClass.BATCH))
    assert list(q.drain_in_order(0.0, skip=frozenset({TrafficClass.BATCH}))) == []
    assert len(q) == 1
