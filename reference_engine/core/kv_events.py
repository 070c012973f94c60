"""KV cache events: what the prefix cache stored and threw away, in the shape vLLM publishes.

    BlockStored(block_hashes, parent_block_hash, token_ids, block_size)   full blocks became reusable
    BlockRemoved(block_hashes)                                            they stopped being (evicted)
    AllBlocksCleared()                                                    the whole cache was dropped

The engine core writes them into a `KvEventLog` when one is attached (`EngineCore.kv_events`,
with `[kv_events] enable_kv_cache_events`); whoever serves the engine drains it after each step
and publishes (server/kv_event_publisher.py), replay hands it to a routing index directly. The
core does no I/O: this is a buffer. A block's hash is the engine's own (128 bits, keyed by a
secret of the process: core/prefix_hash.py), so a reader can match a later BlockRemoved to its
BlockStored but cannot compute the hash of a prompt; `token_ids` carry the content, which a
router hashes its own way (routing/prefix_index.py). Replay's blocks have no tokens (a trace
names its prompts by ids): their hashes, the same in every engine, are the content.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

MEDIUM_GPU = "GPU"


@dataclass(frozen=True, slots=True)
class BlockStored:
    block_hashes: list[int]
    parent_block_hash: int | None  # the block before the first of them (None: they start a prompt)
    token_ids: list[int]  # every token of the blocks, in order ([] in replay)
    block_size: int
    medium: str = MEDIUM_GPU


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    block_hashes: list[int]
    medium: str = MEDIUM_GPU


@dataclass(frozen=True, slots=True)
class AllBlocksCleared:
    pass


KvCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared


class KvEventLog:
    """The events since the last `drain`, oldest first, at most `max_pending` of them: a reader
    that stops draining loses the oldest (counted in `num_dropped`), never the engine's memory.
    Appending and draining are O(1) per event; only the engine core appends."""

    def __init__(self, block_size: int, max_pending: int = 100_000) -> None:
        self.block_size = block_size
        self._pending: deque[KvCacheEvent] = deque(maxlen=max_pending)
        self.num_events = 0
        self.num_dropped = 0

    def _append(self, event: KvCacheEvent) -> None:
        if len(self._pending) == self._pending.maxlen:
            self.num_dropped += 1
        self._pending.append(event)
        self.num_events += 1

    def stored(self, block_hashes: list[int], parent_block_hash: int | None, token_ids: list[int]) -> None:
        if block_hashes:
            self._append(BlockStored(block_hashes, parent_block_hash, token_ids, self.block_size))

    def removed(self, block_hashes: list[int]) -> None:
        if block_hashes:
            self._append(BlockRemoved(block_hashes))

    def cleared(self) -> None:
        self._append(AllBlocksCleared())

    def drain(self) -> list[KvCacheEvent]:
        events = list(self._pending)
        self._pending.clear()
        return events

    def __len__(self) -> int:
        return len(self._pending)
