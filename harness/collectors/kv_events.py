"""vLLM's KV cache events over ZMQ: what its prefix cache stores and throws away.

vLLM publishes, when started with

    --kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq",
                         "endpoint": "tcp://*:5557", "topic": "kv-events"}'

one multipart message per batch on a PUB socket: (topic, 8-byte big-endian sequence number,
msgpack payload). The payload is an `EventBatch` (array-like: `[ts, events, dp_rank]`), each
event a tagged struct whose `type` names its kind (a map; a build with array-like events sends
the tag as the first item instead, and is read too):

    {"type": "BlockStored", "block_hashes": [...], "parent_block_hash": ..., "token_ids": [...], ...}
    {"type": "BlockRemoved", "block_hashes": [...], "medium": ...}
    {"type": "AllBlocksCleared"}

Decoding is schema-less (msgspec into lists and maps): a field vLLM adds later does not break it. A
block hash is stored when a full block enters the prefix cache and removed when it is evicted to
make room; a hash stored again after it was removed is a prefix the engine threw away and had
to compute again (thrash). A gap in the sequence numbers is a lost batch (PUB drops when the
subscriber lags), counted and reported, never guessed. The counts go to `meta.final`:

    kv_blocks_stored, kv_blocks_removed, kv_all_cleared, kv_blocks_restored, kv_batches_missed

vLLM binds its PUB socket when the endpoint is a wildcard (`tcp://*:5557`) and otherwise
connects to it: so kvgate connects to `tcp://HOST:5557` in the first case, and for a server
configured with a concrete address (`tcp://127.0.0.1:5557`, which keeps the events on loopback)
it listens there itself: `listen:tcp://127.0.0.1:5557`.

Prefix *hits* emit no event (vLLM reports them as counters), so reuse comes from the
`vllm:prefix_cache_*` counters and the events give evictions and thrash.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

RECV_TIMEOUT_MS = 100
LISTEN = "listen:"


@dataclass
class KvEventStats:
    """Counts over one run. Only `KvEventSubscriber`'s thread (or a test) writes them."""

    num_batches: int = 0
    num_missed: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    blocks_stored: int = 0
    blocks_removed: int = 0
    blocks_restored: int = 0
    _removed: set[Any] = field(default_factory=set, repr=False)
    _last_seq: int | None = field(default=None, repr=False)

    def add_batch(self, seq: int, batch: Any) -> None:
        """One decoded batch ([ts, events, ...]) with its sequence number."""
        if self._last_seq is not None and seq > self._last_seq + 1:
            self.num_missed += seq - self._last_seq - 1
        self._last_seq = seq
        self.num_batches += 1
        events = batch[1] if isinstance(batch, list) and len(batch) > 1 else []
        for event in events:
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                self.add_event(event["type"], event.get("block_hashes"))
            elif isinstance(event, list) and event and isinstance(event[0], str):
                self.add_event(event[0], event[1] if len(event) > 1 else None)

    def add_event(self, kind: str, block_hashes: Any) -> None:
        self.by_kind[kind] += 1
        hashes = [_key(h) for h in block_hashes] if isinstance(block_hashes, list) else []
        if kind == "BlockStored":
            self.blocks_stored += len(hashes)
            restored = self._removed.intersection(hashes)
            self.blocks_restored += len(restored)
            self._removed.difference_update(restored)
        elif kind == "BlockRemoved":
            self.blocks_removed += len(hashes)
            self._removed.update(hashes)
        elif kind == "AllBlocksCleared":
            self._removed.clear()

    def final(self) -> dict[str, int]:
        return {
            "kv_blocks_stored": self.blocks_stored,
            "kv_blocks_removed": self.blocks_removed,
            "kv_all_cleared": self.by_kind["AllBlocksCleared"],
            "kv_blocks_restored": self.blocks_restored,
            "kv_batches_missed": self.num_missed,
        }


def _key(block_hash: Any) -> Any:
    return bytes(block_hash) if isinstance(block_hash, (bytes, bytearray, memoryview)) else block_hash


class KvEventSubscriber:
    """A SUB socket in a daemon thread, until `stop()`: connected to `endpoint`
    (tcp://host:5557), or bound there with a `listen:` prefix (listen:tcp://127.0.0.1:5557)."""

    def __init__(self, endpoint: str, topic: str = "") -> None:
        import msgspec
        import zmq

        self.endpoint = endpoint
        self.stats = KvEventStats()
        self.num_undecodable = 0
        self._decode = msgspec.msgpack.Decoder().decode
        self._decode_error = msgspec.DecodeError
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._socket = self._context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt_string(zmq.SUBSCRIBE, topic)
        if endpoint.startswith(LISTEN):
            self._socket.bind(endpoint.removeprefix(LISTEN))
        else:
            self._socket.connect(endpoint)
        self._again = zmq.Again
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvgate-kv-events", daemon=True)

    def start(self) -> KvEventSubscriber:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frames = self._socket.recv_multipart()
            except self._again:
                continue
            if len(frames) < 3:
                self.num_undecodable += 1
                continue
            try:
                batch = self._decode(frames[-1])
            except self._decode_error:
                self.num_undecodable += 1
                continue
            self.stats.add_batch(int.from_bytes(frames[-2], "big"), batch)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._socket.close()
