"""The router's view of its workers' KV cache events: subscriptions, the prefix index, and chaos.

Each worker slot publishes its events on its own endpoint (kv_event_publisher.py); the router
connects one SUB socket per slot, decodes each batch (kv_event_wire.py) and applies it to the
fleet's `PrefixIndex` (routing/prefix_index.py). Batches are numbered per worker process: a gap
is counted as missed (the index is stale for that worker until its blocks are stored again), a
number that starts again is a new incarnation. A worker that dies takes its KV with it, so its
index entries are dropped at its death (`worker_lost`), before anything is routed on them.

Chaos, through the admin API (`POST /admin/router/chaos`): drop a share of the batches (seeded,
counted), hold each for a delay before it is applied (an index that lags), and `restart`: the
index emptied and every subscription closed and opened again, as a router that restarted. A
stale index only mis-routes: the worker is the one that finds its prefix hits.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from dataclasses import dataclass

import zmq
import zmq.asyncio

from reference_engine.routing import PrefixIndex
from reference_engine.server.kv_event_wire import DecodeError, decode_batch

log = logging.getLogger("kvgate.router")


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
        self._endpoints: dict[int, str] = {}
        self._last_seq: dict[int, int] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._random = random.Random(0)  # seeded: a run drops the same batches each time
        self._context = zmq.asyncio.Context.instance()
        self.num_restarts = 0

    def subscribe(self, worker: int, endpoint: str) -> None:
        """Receive `worker`'s batches from `endpoint` from now on (its slot keeps it across restarts)."""
        self._endpoints[worker] = endpoint
        self.counts.setdefault(worker, Counter())
        if worker not in self._tasks:
            self._tasks[worker] = asyncio.create_task(self._receive(worker, endpoint), name=f"kvgate-kv-{worker}")

    async def _receive(self, worker: int, endpoint: str) -> None:
        sock = self._context.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt_string(zmq.SUBSCRIBE, self.topic)
        sock.connect(endpoint)
        try:
            while True:
                frames = await sock.recv_multipart()
                self._on_batch(worker, frames)
        finally:
            sock.close()

    def _on_batch(self, worker: int, frames: list[bytes]) -> None:
        counts = self.counts[worker]
        try:
            seq = int.from_bytes(frames[-2], "big")
            _, events = decode_batch(frames[-1])
        except (DecodeError, IndexError, ValueError):
            counts["undecodable"] += 1
            return
        last = self._last_seq.get(worker)
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
        """The worker died: what it cached is gone. Its next incarnation numbers from 0."""
        self.index.clear(worker)
        self._last_seq.pop(worker, None)

    def restart(self) -> None:
        """As a router that restarted: an empty index, every subscription closed and opened again."""
        self.index.clear_all()
        self._last_seq.clear()
        self.num_restarts += 1
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()
        for worker, endpoint in self._endpoints.items():
            self.subscribe(worker, endpoint)
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
