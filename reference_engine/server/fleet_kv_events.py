"""The router's view of its workers' KV cache events: subscriptions, the prefix index, and chaos.

Each worker slot publishes its events on its own endpoint (kv_event_publisher.py); the router
connects one SUB socket per worker incarnation, takes the worker's snapshot of what it holds
already (its pinned prefixes were announced before anyone listened: `GET
/admin/kv_events/snapshot`), then decodes each live batch numbered after the snapshot
(kv_event_wire.py) and applies it to the fleet's `PrefixIndex` (routing/prefix_index.py). A gap
in the numbers is counted as missed (the index is stale for that worker until its blocks are
stored again). A worker that dies takes its KV with it, so its index entries are dropped at its
death (`worker_lost`), before anything is routed on them; its next incarnation is subscribed
afresh when it is ready.

Chaos, through the admin API (`POST /admin/router/chaos`): drop a share of the live batches
(seeded, counted), hold each for a delay before it is applied (an index that lags), and
`restart`: the index emptied and every subscription closed and opened again, as a router that
restarted (it is whole again once the snapshots are in). A stale index only mis-routes: the
worker is the one that finds its prefix hits.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import zmq
import zmq.asyncio

from reference_engine.routing import PrefixIndex
from reference_engine.server.kv_event_wire import DecodeError, decode_batch

log = logging.getLogger("kvgate.router")

JOIN_S = 0.1
"""How long a new subscription waits before it asks for the snapshot: ZMQ sends nothing to a SUB
socket until its subscription has reached the publisher, and batches published before that but
after the snapshot would be missed."""

Snapshot = Callable[[], Awaitable[tuple[int, bytes] | None]]
"""Fetches a worker's snapshot: (number of the last batch it reflects, one encoded batch)."""


@dataclass
class KvChaos:
    """What the router does to the batches it receives (all off by default)."""

    drop_fraction: float = 0.0
    delay_s: float = 0.0


class FleetKvEvents:
    """Subscriptions to every worker's KV cache events, into one `PrefixIndex`. Owned by the
    router; only its event loop calls it. `counts` says per worker how many batches were
    applied, missed (a gap in the numbers), dropped or delayed by chaos, or undecodable."""

    def __init__(self, index: PrefixIndex, topic: str = "") -> None:
        self.index = index
        self.topic = topic
        self.chaos = KvChaos()
        self.counts: dict[int, Counter[str]] = {}
        self._endpoints: dict[int, tuple[str, Snapshot]] = {}
        self._last_seq: dict[int, int] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._random = random.Random(0)  # seeded: a run drops the same batches each time
        self._context = zmq.asyncio.Context.instance()
        self.num_restarts = 0

    def subscribe(self, worker: int, endpoint: str, snapshot: Snapshot) -> None:
        """Follow `worker`'s current incarnation from `endpoint`: its snapshot, then its batches."""
        self._endpoints[worker] = (endpoint, snapshot)
        self.counts.setdefault(worker, Counter())
        self._stop(worker)
        self._tasks[worker] = asyncio.create_task(self._follow(worker, endpoint, snapshot), name=f"kvgate-kv-{worker}")

    def _stop(self, worker: int) -> None:
        task = self._tasks.pop(worker, None)
        if task is not None:
            task.cancel()

    async def _follow(self, worker: int, endpoint: str, snapshot: Snapshot) -> None:
        sock = self._context.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt_string(zmq.SUBSCRIBE, self.topic)
        sock.connect(endpoint)
        try:
            await asyncio.sleep(JOIN_S)
            await self._take_snapshot(worker, snapshot)
            while True:
                self._on_batch(worker, await sock.recv_multipart())
        finally:
            sock.close()

    async def _take_snapshot(self, worker: int, snapshot: Snapshot) -> None:
        try:
            snap = await snapshot()
            if snap is None:
                return
            seq, payload = snap
            _, events = decode_batch(payload)
        except Exception as err:  # the live batches still come: the index is only late
            log.warning("router: no KV snapshot from worker %d (%s): its index starts empty", worker, err)
            self.counts[worker]["no_snapshot"] += 1
            return
        self._apply(worker, events)
        self._last_seq[worker] = seq
        self.counts[worker]["snapshots"] += 1

    def _on_batch(self, worker: int, frames: list[bytes]) -> None:
        counts = self.counts[worker]
        try:
            seq = int.from_bytes(frames[-2], "big")
            _, events = decode_batch(frames[-1])
        except (DecodeError, IndexError, ValueError):
            counts["undecodable"] += 1
            return
        last = self._last_seq.get(worker)
        if last is not None and seq <= last:
            return  # the snapshot holds it already
        if last is not None and seq > last + 1:
            counts["missed"] += seq - last - 1
        self._last_seq[worker] = seq
        if self.chaos.drop_fraction and self._random.random() < self.chaos.drop_fraction:
            counts["dropped"] += 1
            return
        if self.chaos.delay_s:
            counts["delayed"] += 1
            asyncio.get_running_loop().call_later(self.chaos.delay_s, self._apply, worker, events)
            return
        self._apply(worker, events)

    def _apply(self, worker: int, events: list) -> None:
        for event in events:
            self.index.apply(worker, event)
        self.counts[worker]["applied"] += 1

    def worker_lost(self, worker: int) -> None:
        """The worker died: what it cached is gone. Its next incarnation is subscribed when ready."""
        self._stop(worker)
        self.index.clear(worker)
        self._last_seq.pop(worker, None)

    def restart(self) -> None:
        """As a router that restarted: an empty index, every subscription closed and opened again."""
        self.index.clear_all()
        self._last_seq.clear()
        self.num_restarts += 1
        for worker, (endpoint, snapshot) in list(self._endpoints.items()):
            if worker in self._tasks:  # a dead worker is followed again when it is ready
                self.subscribe(worker, endpoint, snapshot)
        log.warning("router: prefix index emptied and KV event subscriptions reopened (chaos)")

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    def describe(self, worker: int) -> dict:
        """This worker in the index: blocks indexed, KV event batches by outcome."""
        return {
            "indexed_blocks": self.index.num_blocks(worker),
            "kv_batches": dict(self.counts.get(worker, {})),
        }
