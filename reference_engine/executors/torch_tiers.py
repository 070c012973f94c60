"""The KV tiers below the torch executor's device pool: host memory and disk, by content key.

The engine decides which cached prefix blocks leave the device and which come back; it names
them in `StepPlan.tier_transfers` and `StepPlan.tier_drops` by content key (the block's prefix
hash). This module holds those blocks and moves their bytes:

- **host**: one contiguous host tensor per block `[layers, 2, 1, block_tokens, kv_heads,
  head_dim]` (pinned on CUDA, so copies to and from the device are DMA), in a dict by key;
- **disk**: one file per block (`torch_block_file`: atomic write, a header with key, dtype and
  shape, a SHA-256 checksum checked on every read), in a directory the store makes on first use
  inside `disk_parent` (default: the system temporary directory) and removes on `close` — or,
  if nobody calls it, when the store is garbage-collected or the process exits.

As the engine's tiers (core/tiers.py): a demotion or a move between lower tiers *moves* a block
(after it the key lives in `dst` and no longer in a lower `src`; the device side is the engine's
block pool), and a promotion *copies* it (the lower tier keeps its copy, so the block's next
eviction costs no write). A lower tier forgets a block only by moving it down or by a
`TierDrop`. Writing a key a tier already holds replaces it (same key, same content).

`TierStore.apply` runs a plan's tier work around the executor's compactions and swaps, in the
order `TierTransfer` prescribes:

    demotions (out of the device) and moves between lower tiers, in list order
    drops
    (compactions, swaps: the executor's own)
    promotions (into the device), each block read and checked before it is written

A promoted block that is missing or corrupt is not written: `apply_promotions` returns its key
(the step's `failed_promotions`), the tier forgets it, and the engine recomputes the load that
held it (the request waits for its load and reads none of its blocks before then, so nothing
read the unwritten block). The engine's later drop of such a key is expected. A move between
lower tiers that cannot read its block raises at that block, with the moves listed before it
applied; dropping any other key a tier does not hold raises too: the engine and the executor
disagree about what the tier holds.

Costs: a demotion or promotion is one device copy per block; disk adds one file write or read
and one SHA-256 pass per block. Lookups are dict operations, O(1) per key.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from record.errors import TierBlockError
from reference_engine.executors.base import Tier, TierDrop, TierTransfer
from reference_engine.executors.torch_block_file import read_block, write_block
from reference_engine.executors.torch_kv import PagedKVCache


class TierStore:
    """Host and disk copies of KV blocks, by content key. Only `TierStore` changes `_host`,
    `_disk` and the directory; the caller owns the device pool it copies from and into."""

    def __init__(self, cache: PagedKVCache, *, disk_parent: str | None = None) -> None:
        self.cache = cache
        self.block_shape = (*cache.data.shape[:2], 1, *cache.data.shape[3:])
        self.dtype = cache.data.dtype
        self.block_bytes = cache.block_tokens * cache.bytes_per_token
        self._pin = cache.device.type == "cuda"
        self._host: dict[int, Tensor] = {}
        self._disk: set[int] = set()
        self._lost: set[tuple[Tier, int]] = set()  # failed promotions: forgotten, the engine's drop to come
        self._disk_parent = disk_parent
        self._dir: Path | None = None
        self._cleanup: weakref.finalize | None = None

    # ------------------------------------------------------------ a plan's work
    def apply_outbound(self, transfers: Sequence[TierTransfer], drops: Sequence[TierDrop]) -> None:
        """Every transfer out of the device and between lower tiers (list order), then the drops."""
        for t in transfers:
            assert t.src is not t.dst, f"a transfer from {t.src.value} to itself"
            if t.src is Tier.GPU:
                assert len(t.keys) == len(t.device_blocks), "one device block per key"
                for key, b in zip(t.keys, t.device_blocks):
                    self._put(t.dst, key, self.cache.copy_out([b]))
            elif t.dst is not Tier.GPU:
                for key in t.keys:
                    self._put(t.dst, key, self._get(t.src, key))
                    self._forget(t.src, key)
        for d in drops:
            for key in d.keys:
                self._forget(d.tier, key)

    def apply_promotions(self, transfers: Sequence[TierTransfer]) -> dict[int, int]:
        """Every transfer into the device; the lower tiers keep their copies. Returns the keys
        whose block could not be read (missing or corrupt), each with the device block left
        unwritten; the tier forgets them."""
        failed: dict[int, int] = {}
        for t in transfers:
            if t.dst is not Tier.GPU:
                continue
            assert len(t.keys) == len(t.device_blocks), "one device block per key"
            for key, b in zip(t.keys, t.device_blocks):
                try:
                    block = self._get(t.src, key)
                except TierBlockError:
                    failed[key] = b
                    self._lose(t.src, key)
                    continue
                self.cache.copy_in(block, [b])
        return failed

    def _lose(self, tier: Tier, key: int) -> None:
        held = self._host if tier is Tier.HOST else self._disk
        if key in held:
            self._forget(tier, key)
        self._lost.add((tier, key))

    # ------------------------------------------------------------ inspection
    def keys(self, tier: Tier) -> set[int]:
        return set(self._host) if tier is Tier.HOST else set(self._disk)

    def num_bytes(self, tier: Tier) -> int:
        """Bytes of KV the tier holds (payloads only; a disk file adds a header of ~150 bytes)."""
        return len(self.keys(tier)) * self.block_bytes

    @property
    def disk_dir(self) -> Path | None:
        """The directory of the disk tier's files, once the first one was written."""
        return self._dir

    def close(self) -> None:
        """Forget every block and remove the disk tier's directory. Idempotent."""
        self._host.clear()
        self._disk.clear()
        if self._cleanup is not None:
            self._cleanup()

    # ------------------------------------------------------------ one block
    def _put(self, tier: Tier, key: int, block: Tensor) -> None:
        assert block.shape == self.block_shape and block.dtype == self.dtype, "a block of this pool"
        if tier is Tier.HOST:
            self._host[key] = block
            return
        assert tier is Tier.DISK, f"no lower tier {tier.value!r}"
        if self._pin:  # a device-to-host copy into this block may still be in flight
            torch.cuda.synchronize(self.cache.device)
        write_block(self._path(key), key, block)
        self._disk.add(key)

    def _get(self, tier: Tier, key: int) -> Tensor:
        if tier is Tier.HOST:
            block = self._host.get(key)
            if block is None:
                raise TierBlockError(f"host tier holds no block {key}; it is not served", tier="host", key=key)
            return block
        if key not in self._disk:
            raise TierBlockError(f"disk tier holds no block {key}; it is not served", tier="disk", key=key)
        return read_block(self._path(key), key, self.block_shape, self.dtype, pin=self._pin)

    def _forget(self, tier: Tier, key: int) -> None:
        held = self._host if tier is Tier.HOST else self._disk
        if (tier, key) in self._lost and key not in held:  # the engine forgets a block whose load failed
            self._lost.discard((tier, key))
            return
        if key not in held:
            raise TierBlockError(
                f"{tier.value} tier was told to forget block {key}, which it does not hold", tier=tier.value, key=key
            )
        if tier is Tier.HOST:
            del self._host[key]
        else:
            self._disk.discard(key)
            self._path(key).unlink(missing_ok=True)

    def _path(self, key: int) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="kvgate-disk-tier-", dir=self._disk_parent))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        return self._dir / f"{key:x}.kvblock"
