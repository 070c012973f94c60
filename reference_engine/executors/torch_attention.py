"""Attention backends for the decoder: paged (what serving runs) and dense (the reference).

`PagedAttention` serves one engine step. The step's new tokens form one flat stream (every
scheduled chunk, in plan order); per layer their keys and values are written into the paged
cache, then each sequence's whole KV is gathered through its block table and attended with
`scaled_dot_product_attention`: causal inside the chunk, full over the cached prefix. Decode
chunks (one token each) are batched into one call; each prefill chunk gets its own, so a long
chunk never pads a batch of decodes to its length.

With `record_mass`, attention is computed explicitly instead, and the step returns per sequence
the attention *mass* each KV token received: summed over the step's queries, averaged over
heads and layers. Each query spreads a mass of 1, so a sequence's masses sum to its number of new
tokens (a decode step: a distribution over its KV tokens). h2o accumulates these.

`DenseAttention` recomputes one whole sequence without any cache, with plain matmul + softmax:
the independent reference that tests and the divergence measurement compare against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from reference_engine.executors.torch_kv import PagedKVCache


@dataclass(frozen=True, slots=True)
class SeqSlice:
    """One sequence's part of a step: `num_new` tokens appended after `kv_start` cached ones."""

    block_ids: Sequence[int]
    kv_start: int
    num_new: int


@dataclass(slots=True)
class _Group:
    """Sequences attended in one batched call, padded to the longest query and KV length."""

    members: list[int]  # indices into the step's sequences
    q_rows: Tensor  # [B, Q] rows of the flat token stream (padding repeats the sequence's first row)
    q_valid: Tensor  # [B, Q] bool
    valid_at: Tensor  # positions of the valid entries of q_valid, flattened
    valid_rows: Tensor  # the stream rows at those positions
    new_slots: Tensor  # the cache slots their keys and values go to
    kv_slots: Tensor  # [B, L] cache slots (padding: a slot of block 0, masked out)
    mask: Tensor  # [B, 1, Q, L] bool, True = may attend


def _build_group(
    cache: PagedKVCache, seqs: Sequence[SeqSlice], offsets: Sequence[int], members: list[int], device: torch.device
) -> _Group:
    """Index tensors for a group, built on the host with a handful of vectorised ops."""
    starts = torch.tensor([seqs[i].kv_start for i in members])
    news = torch.tensor([seqs[i].num_new for i in members])
    totals = starts + news
    q_max, kv_max = int(news.max()), int(totals.max())
    width = -(-kv_max // cache.block_tokens)
    tables = [list(seqs[i].block_ids[:width]) for i in members]
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables])  # padded with block 0, masked out
    j = torch.arange(q_max)[None]
    q_valid = j < news[:, None]
    q_rows = torch.tensor([offsets[i] for i in members])[:, None] + torch.where(q_valid, j, 0)
    q_pos = torch.where(q_valid, starts[:, None] + j, 0)
    cols = torch.arange(kv_max)[None]
    kv_valid = cols < totals[:, None]
    kv_slots = torch.where(kv_valid, cache.slots(table, cols.expand(len(members), -1)), 0)
    mask = (cols[:, None, :] <= q_pos[:, :, None]) & kv_valid[:, None, :]  # padded queries see KV token 0
    valid_at = q_valid.view(-1).nonzero().squeeze(1)
    new_slots = cache.slots(table, q_pos).view(-1)[valid_at]
    return _Group(
        members,
        q_rows.to(device),
        q_valid.to(device),
        valid_at.to(device),
        q_rows.view(-1)[valid_at],
        new_slots,
        kv_slots.to(device),
        mask[:, None].to(device),
    )


def _explicit(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Attention with its probabilities. q [B, H, Q, D]; k, v [B, KVH, L, D]; mask [B, 1, Q, L]."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
    probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (probs @ v.float()).to(q.dtype), probs


class PagedAttention:
    """The attention backend of one engine step over the paged cache."""

    def __init__(self, cache: PagedKVCache, seqs: Sequence[SeqSlice], *, record_mass: bool = False) -> None:
        self.cache = cache
        self.seqs = seqs
        device = cache.device
        offsets, total = [], 0
        for s in seqs:
            offsets.append(total)
            total += s.num_new
        decodes = [i for i, s in enumerate(seqs) if s.num_new == 1]
        prefills = [[i] for i, s in enumerate(seqs) if s.num_new > 1]
        members = ([decodes] if decodes else []) + prefills
        self._groups = [_build_group(cache, seqs, offsets, m, device) for m in members]
        write_slots = torch.empty(total, dtype=torch.long)  # in stream order
        for g in self._groups:
            write_slots[g.valid_rows] = g.new_slots
            g.valid_rows = g.valid_rows.to(device)
        self._write_slots = write_slots.to(device)
        self._mass: list[Tensor | None] = [None] * len(seqs) if record_mass else []
        self._num_layers = 0

    def __call__(self, layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        self.cache.write(layer, self._write_slots, k, v)
        out = torch.empty_like(q)
        for g in self._groups:
            b, q_len = g.q_rows.shape
            qb = q.index_select(0, g.q_rows.view(-1)).view(b, q_len, *q.shape[1:]).transpose(1, 2)  # [B, H, Q, D]
            kb, vb = (x.transpose(1, 2).to(q.dtype) for x in self.cache.gather(layer, g.kv_slots))
            if self._mass:
                ob, probs = _explicit(qb, kb, vb, g.mask)
                self._accumulate(g, probs)
            else:
                ob = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=g.mask, enable_gqa=True)
            ob = ob.transpose(1, 2).reshape(b * q_len, *q.shape[1:]).index_select(0, g.valid_at)
            out.index_copy_(0, g.valid_rows, ob)
        self._num_layers = max(self._num_layers, layer + 1)
        return out

    def _accumulate(self, g: _Group, probs: Tensor) -> None:
        per_token = (probs * g.q_valid[:, None, :, None]).sum(dim=2).mean(dim=1)  # [B, L]
        for row, i in enumerate(g.members):
            total = self.seqs[i].kv_start + self.seqs[i].num_new
            prev = self._mass[i]
            self._mass[i] = per_token[row, :total] if prev is None else prev + per_token[row, :total]

    def attention_mass(self) -> list[list[float]]:
        """Per sequence (in step order), the mass each KV token received; see the module doc."""
        assert self._mass, "built without record_mass"
        masses: list[list[float]] = []
        for m in self._mass:
            assert m is not None, "every sequence attends in every layer"
            masses.append((m / self._num_layers).tolist())
        return masses


class DenseAttention:
    """Reference attention for one sequence forwarded whole: no cache, causal, explicit softmax."""

    def __call__(self, layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        t = q.shape[0]
        causal = torch.ones((t, t), dtype=torch.bool, device=q.device).tril()
        out, _ = _explicit(
            q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], causal[None, None]
        )
        return out[0].transpose(0, 1)
