"""The router's reservation ledger: which request holds how many KV blocks on which worker.

Invariants (checked, they are what the worker-kill gate relies on):
- a request holds at most one reservation at any moment: a retry elsewhere releases the old
  reservation *before* it reserves again, and `reserve` refuses a second one;
- a dead worker holds none: `release_worker` drops all of them at once, each with a
  `reservation_released` event (reason `worker_lost`), after one `worker_died` event.

`release_on_worker_loss = False` (config `server.release_reservations_on_worker_loss`) builds a
broken router on purpose, the one the no-orphans gate must catch: a dead worker's reservations
are kept, counted against that worker's slot and in the ledger's size, but no longer reachable
by their requests (whose own release then finds nothing), so nothing ever frees them.

Reservations are the router's worst-case estimate (prompt + max_tokens, as admission counts
them); the worker's own admission stays the authority on what really fits. Load per worker
(`reserved_blocks`) is what least-load routing compares. All operations are O(1) except
`release_worker`, O(reservations on that worker). Router times are its own engine-clock seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from record.events import EventKind
from reference_engine.clock import Clock
from reference_engine.server.merged_events import MergedEventLog


@dataclass(slots=True)
class Reservation:
    request_id: str
    worker: int
    num_blocks: int
    tenant: str | None
    t_s: float


class ReservationLedger:
    def __init__(
        self, clock: Clock, events: MergedEventLog, num_workers: int, *, release_on_worker_loss: bool = True
    ) -> None:
        self.clock = clock
        self.events = events
        self.release_on_worker_loss = release_on_worker_loss
        self._by_request: dict[str, Reservation] = {}
        self._by_worker: list[dict[str, Reservation]] = [{} for _ in range(num_workers)]
        self._orphaned: list[Reservation] = []  # only with release_on_worker_loss off
        self.reserved_blocks = [0] * num_workers

    def __len__(self) -> int:
        return len(self._by_request) + len(self._orphaned)

    def get(self, request_id: str) -> Reservation | None:
        return self._by_request.get(request_id)

    def num_requests(self, worker: int) -> int:
        return len(self._by_worker[worker])

    def reserve(self, request_id: str, worker: int, num_blocks: int, tenant: str | None) -> Reservation:
        held = self._by_request.get(request_id)
        assert held is None, f"request {request_id} already holds a reservation on worker {held.worker}"
        r = Reservation(request_id, worker, num_blocks, tenant, self.clock.now())
        self._by_request[request_id] = r
        self._by_worker[worker][request_id] = r
        self.reserved_blocks[worker] += num_blocks
        return r

    def release(self, request_id: str, reason: str) -> Reservation | None:
        """Drop a request's reservation (None if it holds none, e.g. its worker already died)."""
        r = self._by_request.pop(request_id, None)
        if r is None:
            return None
        del self._by_worker[r.worker][request_id]
        self.reserved_blocks[r.worker] -= r.num_blocks
        self.events.emit(
            self.clock.now(),
            EventKind.RESERVATION_RELEASED,
            request_id=request_id,
            tenant=r.tenant,
            num_blocks=r.num_blocks,
            reason=reason,
            worker=r.worker,
        )
        return r

    def release_worker(self, worker: int, cause: str) -> list[Reservation]:
        """A worker died: record it and release everything it held (the broken router keeps it)."""
        self.events.emit(self.clock.now(), EventKind.WORKER_DIED, reason=cause, worker=worker)
        if not self.release_on_worker_loss:
            for rid in list(self._by_worker[worker]):
                self._orphaned.append(self._by_request.pop(rid))
                del self._by_worker[worker][rid]  # its blocks stay in reserved_blocks[worker]
            return []
        released = [self.release(rid, "worker_lost") for rid in list(self._by_worker[worker])]
        assert not self._by_worker[worker] and self.reserved_blocks[worker] == 0
        return [r for r in released if r is not None]

    def rows(self) -> list[dict]:
        return [
            {
                "request_id": r.request_id,
                "worker": r.worker,
                "num_blocks": r.num_blocks,
                "tenant": r.tenant,
                "t_s": r.t_s,
            }
            for r in (*self._by_request.values(), *self._orphaned)
        ]
