"""The waiting queue: one FIFO per traffic class, served by priority with aging.

Within a class requests are served in arrival order (`seq_no`); a preempted request keeps its
original `seq_no`, so it neither jumps ahead of older requests nor falls behind newer ones.
Across classes the head with the highest *effective* priority goes first:

    effective = class priority + waited_s / aging_s

so a batch request that has waited `aging_s` longer than the interactive head overtakes it: no
class starves. With `fcfs` (the vLLM-like and `none` baselines) there is a single class.

Each class is a binary heap keyed by `seq_no`: push/pop O(log n), peek O(1). A request removed
while waiting (cancelled, deadline) is dropped lazily when it reaches the head. Queue deadlines
are tracked per traffic class (`admission.queue_deadline_for`): arrivals of one class share one
deadline offset, so each class's deadline deque is in deadline order and expiry is
O(expired + already started); one deque for all would let a batch job's longer deadline at its
head hide the chat requests behind it whose deadline had passed.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from reference_engine.config import TrafficClass
from reference_engine.request import Request, RequestState

_WAITING_STATES = (RequestState.WAITING, RequestState.PREEMPTED)


class WaitingQueue:
    def __init__(self, aging_s: float, fcfs: bool) -> None:
        self.aging_s = aging_s
        self.fcfs = fcfs
        self._heaps: dict[TrafficClass, list[tuple[int, Request]]] = {c: [] for c in TrafficClass}
        self.num_by_class: dict[TrafficClass, int] = {c: 0 for c in TrafficClass}
        # new arrivals in order, per class: within a class deadlines only grow
        self._deadlines: dict[TrafficClass, deque[Request]] = {c: deque() for c in TrafficClass}

    def _class_of(self, r: Request) -> TrafficClass:
        return TrafficClass.INTERACTIVE if self.fcfs else r.traffic_class

    def enqueue(self, r: Request) -> None:
        """A new arrival (its deadline is tracked); use `push` to put back a popped request."""
        self.push(r)
        if r.deadline_s is not None:
            self._deadlines[r.traffic_class].append(r)

    def push(self, r: Request) -> None:
        heapq.heappush(self._heaps[self._class_of(r)], (r.seq_no, r))
        self.num_by_class[r.traffic_class] += 1

    def discard(self, r: Request) -> None:
        """Note that `r` left the queue by other means; its heap entry is dropped lazily."""
        self.num_by_class[r.traffic_class] -= 1

    def __len__(self) -> int:
        return sum(self.num_by_class.values())

    def _head(self, cls: TrafficClass) -> Request | None:
        heap = self._heaps[cls]
        while heap and heap[0][1].state not in _WAITING_STATES:
            heapq.heappop(heap)
        return heap[0][1] if heap else None

    def _pop(self, cls: TrafficClass) -> Request:
        _, r = heapq.heappop(self._heaps[cls])
        self.num_by_class[r.traffic_class] -= 1
        return r

    def effective_priority(self, r: Request, now_s: float) -> float:
        base = 0 if self.fcfs else r.priority
        return base + max(0.0, now_s - r.arrival_s) / self.aging_s

    def drain_in_order(self, now_s: float, skip: frozenset[TrafficClass] = frozenset()) -> Iterator[Request]:
        """Pop requests best-first. The caller must `push` back those it does not start.

        Classes in `skip` are not served (e.g. batch while its prefill is paused)."""
        while True:
            best_cls, best_key = None, None
            for cls in TrafficClass:
                if cls in skip:
                    continue
                head = self._head(cls)
                if head is None:
                    continue
                key = (self.effective_priority(head, now_s), -head.seq_no)
                if best_key is None or key > best_key:
                    best_cls, best_key = cls, key
            if best_cls is None:
                return
            yield self._pop(best_cls)

    def expired(self, now_s: float) -> list[Request]:
        """Never-started requests whose queue deadline passed, class by class."""
        out = []
        for dq in self._deadlines.values():
            while dq:
                r = dq[0]
                if r.state is not RequestState.WAITING:
                    dq.popleft()  # started, cancelled or finished meanwhile
                else:
                    assert r.deadline_s is not None, "enqueue tracks only requests with a deadline"
                    if r.deadline_s <= now_s:
                        out.append(dq.popleft())
                    else:
                        break
        return out

    def next_deadline_s(self) -> float | None:
        heads: list[float] = []
        for dq in self._deadlines.values():
            while dq and dq[0].state is not RequestState.WAITING:
                dq.popleft()
            if dq:
                deadline_s = dq[0].deadline_s
                assert deadline_s is not None, "enqueue tracks only requests with a deadline"
                heads.append(deadline_s)
        return min(heads, default=None)

    def __iter__(self) -> Iterator[Request]:
        for heap in self._heaps.values():
            for _, r in heap:
                if r.state in _WAITING_STATES:
                    yield r
