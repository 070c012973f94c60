"""The KV cache event publisher of one engine process: a ZMQ PUB socket at `[kv_events] endpoint`.

After every engine step the loop hands over what the core's `KvEventLog` collected; this sends it
as one batch in vLLM's framing (kv_event_wire.py), numbered 0, 1, 2, ... per process so that a
subscriber counts what it missed. A send never blocks the engine: past the high-water mark, or
with no subscriber, ZMQ drops the batch (a subscriber sees the gap in the numbers).

A subscriber that joins late (a router whose worker pinned prefixes before it connected, a
router that restarted) has missed what the cache already holds, and a cache hit announces
nothing. So the publisher also keeps what it has announced and not taken back, each block with
its parent and tokens, and hands it out as one batch (`snapshot`, served on the worker's
`GET /admin/kv_events/snapshot`) with the number of the last batch it reflects: the subscriber
applies the snapshot, then the live batches numbered after it. (vLLM's answer is a replay
socket over a bounded history; a snapshot does not run out.)

Unlike vLLM, which binds only a wildcard endpoint and connects to any other, kvgate always binds:
its events carry prompt tokens, so the default endpoint is on loopback, and a subscriber (the
router, `kvgate run --kv-events tcp://HOST:PORT`) connects. Worker i of a router binds port + i,
on a socket its supervisor bound once and hands to every incarnation (`fd`), so a restarted
worker publishes where its subscribers already wait; port 0 takes a free port.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Protocol

import zmq

from reference_engine.config.engine_config import KvEventsConfig, KvEventsPublisher
from reference_engine.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KvCacheEvent
from reference_engine.server.kv_event_wire import encode_batch

log = logging.getLogger("kvgate.kv_events")

HIGH_WATER_MARK = 100_000


class KvEventSink(Protocol):
    """Where an engine loop hands each step's KV cache events."""

    @property
    def endpoint(self) -> str | None:
        """Where subscribers connect (None: nowhere)."""
        ...

    def publish(self, events: list[KvCacheEvent]) -> None: ...

    def snapshot(self) -> tuple[int, bytes] | None:
        """(number of the last batch published, a batch announcing every block held now), or None."""
        ...

    def close(self) -> None: ...


class HeldBlocks:
    """The blocks announced and not taken back, with their parents and tokens, in the order they
    were stored (a parent before its children). O(block) per block stored or removed."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[int | None, list[int], int]] = {}  # hash -> (parent, tokens, block size)

    def apply(self, events: list[KvCacheEvent]) -> None:
        for e in events:
            if isinstance(e, BlockStored):
                parent, size = e.parent_block_hash, e.block_size
                for i, h in enumerate(e.block_hashes):
                    self._held[h] = (parent, e.token_ids[i * size : (i + 1) * size], size)
                    parent = h
            elif isinstance(e, BlockRemoved):
                for h in e.block_hashes:
                    self._held.pop(h, None)
            elif isinstance(e, AllBlocksCleared):
                self._held.clear()

    def events(self) -> list[KvCacheEvent]:
        return [BlockStored([h], parent, tokens, size) for h, (parent, tokens, size) in self._held.items()]


def host_port(endpoint: str) -> tuple[str, int]:
    """('127.0.0.1', 5557) of 'tcp://127.0.0.1:5557' (the config validated its shape)."""
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    return host, int(port)


def worker_endpoint(endpoint: str, worker: int) -> str:
    """Where worker `worker` publishes: the port offset by its index (vLLM's per-rank offset); a
    port of 0 stays 0 (a free one each)."""
    host, port = host_port(endpoint)
    return f"tcp://{host}:{port + worker if port else 0}"


class NullPublisher:
    """Collects nothing anywhere: `publisher = "null"`."""

    endpoint: str | None = None

    def publish(self, events: list[KvCacheEvent]) -> None:
        pass

    def snapshot(self) -> tuple[int, bytes] | None:
        return None

    def close(self) -> None:
        pass


class ZmqPublisher:
    """A bound PUB socket; `endpoint` is where it really listens (port 0 resolved)."""

    def __init__(self, endpoint: str, topic: str = "", *, fd: int | None = None, rank: int | None = None) -> None:
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUB)
        self._socket.set_hwm(HIGH_WATER_MARK)
        self._socket.setsockopt(zmq.LINGER, 0)
        if fd is not None:
            self._socket.setsockopt(zmq.USE_FD, fd)  # a socket bound (and listening) by the supervisor
        host, port = host_port(endpoint)
        self._socket.bind(f"tcp://{host}:{port or '*'}")
        self.endpoint: str | None = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._topic = topic.encode()
        self._rank = rank
        self._seq = itertools.count()
        self.last_seq = -1  # the number of the last batch published
        self._held = HeldBlocks()
        self.num_unsent = 0
        log.info("KV cache events published on %s", self.endpoint)

    def publish(self, events: list[KvCacheEvent]) -> None:
        if not events:
            return
        payload = encode_batch(time.time(), events, self._rank)
        self._held.apply(events)
        self.last_seq = next(self._seq)
        try:
            self._socket.send_multipart((self._topic, self.last_seq.to_bytes(8, "big"), payload), zmq.NOBLOCK)
        except zmq.Again:
            self.num_unsent += 1

    def snapshot(self) -> tuple[int, bytes] | None:
        return self.last_seq, encode_batch(time.time(), self._held.events(), self._rank)

    def close(self) -> None:
        self._socket.close()


def make_publisher(config: KvEventsConfig, *, worker: int | None = None, fd: int | None = None) -> KvEventSink | None:
    """The publisher the config asks for (None: events are off)."""
    if not config.enable_kv_cache_events:
        return None
    if config.publisher is KvEventsPublisher.NULL:
        return NullPublisher()
    endpoint = config.endpoint if worker is None else worker_endpoint(config.endpoint, worker)
    return ZmqPublisher(endpoint, config.topic, fd=fd, rank=worker)
