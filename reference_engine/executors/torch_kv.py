"""The paged KV cache as real device memory, and the host copies that swapping moves it to.

One tensor `[layers, 2 (K, V), num_blocks, block_tokens, kv_heads, head_dim]` is allocated once,
at engine start, from the engine's `MemoryPlan`: a pool of N blocks is exactly
N × block_tokens × bytes_per_token bytes, which is what pynvml sees on a GPU. Block `b` of every
layer holds the tokens that the engine's block tables map to `b`; the engine's `BlockPool` is
the only allocator, this class only reads and writes the memory behind its ids.

Addressing is by *slot*: token `i` of a request's KV (in `block_ids` order) lives in slot
`block_ids[i // block_tokens] * block_tokens + i % block_tokens` of a layer's flat
`[num_blocks · block_tokens, kv_heads, head_dim]` view. Writes and gathers are one indexed
copy per layer.

Compaction (`move`): a token-level policy keeps some tokens of a request, and their K/V move
to the front of its block table, in order; keys are stored after RoPE, so each keeps its
position. Swap: `copy_out` copies blocks to a host tensor (pinned on CUDA, so the copy is a DMA that
overlaps with compute) block by block, with no temporary device buffer — a swap happens when
device memory is scarce. `copy_in` writes a host copy into new device blocks. All copies are
issued on the current stream, so they are ordered before any later write to the same blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


class PagedKVCache:
    """K and V for every block of the pool. Shape and size are fixed for the engine's life."""

    def __init__(
        self,
        *,
        num_layers: int,
        num_blocks: int,
        block_tokens: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.block_tokens = block_tokens
        self.device = device
        # zeros, not empty: the memory is touched now (host RSS and pynvml see it at start-up),
        # and never-written slots hold no NaN that a masked-out product could spread.
        self.data = torch.zeros(
            (num_layers, 2, num_blocks, block_tokens, num_kv_heads, head_dim), dtype=dtype, device=device
        )
        self._flat = self.data.view(num_layers, 2, num_blocks * block_tokens, num_kv_heads, head_dim)

    @property
    def num_blocks(self) -> int:
        return self.data.shape[2]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    @property
    def bytes_per_token(self) -> int:
        layers, kv, _, _, heads, dim = self.data.shape
        return layers * kv * heads * dim * self.data.element_size()

    def slots(self, block_table: Tensor, positions: Tensor) -> Tensor:
        """Slots of the KV tokens at `positions` [B, L] (indices into each request's KV) of requests
        whose block tables are the rows of `block_table` [B, num_blocks_each]."""
        bt = self.block_tokens
        return block_table.gather(1, positions // bt) * bt + positions % bt

    def write(self, layer: int, slots: Tensor, k: Tensor, v: Tensor) -> None:
        """Store K and V [T, kv_heads, head_dim] of T new tokens at `slots` [T]."""
        self._flat[layer, 0].index_copy_(0, slots, k.to(self.data.dtype))
        self._flat[layer, 1].index_copy_(0, slots, v.to(self.data.dtype))

    def gather(self, layer: int, slots: Tensor) -> tuple[Tensor, Tensor]:
        """K and V at `slots` [B, L] -> two [B, L, kv_heads, head_dim] tensors."""
        flat, shape = self._flat[layer], (*slots.shape, *self._flat.shape[3:])
        # index_select, not `flat[0][slots]`: advanced indexing parallelises badly on a busy CPU
        return flat[0].index_select(0, slots.view(-1)).view(shape), flat[1].index_select(0, slots.view(-1)).view(shape)

    def move(self, src_slots: Tensor, dst_slots: Tensor) -> None:
        """Copy K and V of every layer from `src_slots` to `dst_slots` [T] (token-level compaction).
        All sources are read before any destination is written, so the two may overlap."""
        self._flat.index_copy_(2, dst_slots, self._flat.index_select(2, src_slots))

    def copy_out(self, block_ids: Sequence[int]) -> Tensor:
        """A host copy [layers, 2, n, block_tokens, kv_heads, head_dim] of these blocks."""
        shape = (*self.data.shape[:2], len(block_ids), *self.data.shape[3:])
        host = torch.empty(shape, dtype=self.data.dtype, pin_memory=self.device.type == "cuda")
        for i, b in enumerate(block_ids):
            host[:, :, i].copy_(self.data[:, :, b], non_blocking=True)
        return host

    def copy_in(self, host: Tensor, block_ids: Sequence[int]) -> None:
        """Write a `copy_out` result into (new) device blocks, in order."""
        assert host.shape[2] == len(block_ids), "swap-in must restore exactly the blocks swapped out"
        for i, b in enumerate(block_ids):
            self.data[:, :, b].copy_(host[:, :, i], non_blocking=True)
