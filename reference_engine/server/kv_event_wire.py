"""KV cache events on the wire, as vLLM sends them (`vllm/distributed/kv_events.py`).

One ZMQ multipart message per batch: (topic, 8-byte big-endian sequence number, msgpack
payload). The payload is an array-like `EventBatch`, `[ts, events, data_parallel_rank]`, each
event an array-like struct tagged with its kind as its first item, vLLM's released layout:

    ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
    ["BlockRemoved", block_hashes, medium]
    ["AllBlocksCleared"]

`ts` is unix time in seconds. vLLM's block hashes are `bytes | int`; the engine's are 128-bit, so
they travel as 16 big-endian bytes. The harness's subscriber (harness/collectors/kv_events.py),
which reads vLLM's, reads these; the router decodes them back into the core's event types.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reference_engine.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KvCacheEvent

HASH_BYTES = 16


class _Batch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class _Event(msgspec.Struct, array_like=True, gc=False, tag=True):
    pass


class _Stored(_Event, tag="BlockStored"):
    block_hashes: list[bytes | int]
    parent_block_hash: bytes | int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class _Removed(_Event, tag="BlockRemoved"):
    block_hashes: list[bytes | int]
    medium: str | None


class _Cleared(_Event, tag="AllBlocksCleared"):
    pass


class _WireBatch(_Batch):
    events: list[_Stored | _Removed | _Cleared]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_WireBatch)
DecodeError = msgspec.DecodeError


def _to_wire(h: int) -> bytes:
    return h.to_bytes(HASH_BYTES, "big")


def _from_wire(h: bytes | int) -> int:
    return int.from_bytes(h, "big") if isinstance(h, bytes) else h


def encode_batch(ts: float, events: list[KvCacheEvent], rank: int | None = None) -> bytes:
    wire: list[_Stored | _Removed | _Cleared] = []
    for e in events:
        if isinstance(e, BlockStored):
            parent = None if e.parent_block_hash is None else _to_wire(e.parent_block_hash)
            wire.append(
                _Stored([_to_wire(h) for h in e.block_hashes], parent, e.token_ids, e.block_size, None, e.medium)
            )
        elif isinstance(e, BlockRemoved):
            wire.append(_Removed([_to_wire(h) for h in e.block_hashes], e.medium))
        else:
            wire.append(_Cleared())
    return _encoder.encode(_WireBatch(ts, wire, rank))


def decode_batch(payload: bytes) -> tuple[float, list[KvCacheEvent]]:
    """(ts, events) of one payload; raises DecodeError for anything else."""
    batch = _decoder.decode(payload)
    events: list[KvCacheEvent] = []
    for e in batch.events:
        if isinstance(e, _Stored):
            parent = None if e.parent_block_hash is None else _from_wire(e.parent_block_hash)
            events.append(
                BlockStored(
                    [_from_wire(h) for h in e.block_hashes], parent, e.token_ids, e.block_size, e.medium or "GPU"
                )
            )
        elif isinstance(e, _Removed):
            events.append(BlockRemoved([_from_wire(h) for h in e.block_hashes], e.medium or "GPU"))
        else:
            events.append(AllBlocksCleared())
    return batch.ts, events
