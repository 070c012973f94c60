"""The torch executor: a real Llama-style model over a real paged KV tensor, on CPU or CUDA.

It plugs into the engine exactly where the sim does (`engine.executor = "torch"`) and sees the
same `StepPlan`s; the scheduler, the block pool and the policies do not know which one runs.
One `execute(plan)`:

1. tier demotions and moves between lower tiers (`plan.tier_transfers` out of the device or
   between host and disk), then tier drops (`torch_tiers.TierStore`), *first*: the blocks they
   read may already belong to another request of this very step; then token-level compactions
   (`plan.compactions`, h2o / streamingllm): the kept tokens' K/V move to the front of their
   request's blocks (same reason); then swaps: `plan.swap_out` blocks are copied to host
   tensors, then `plan.swap_in` host copies are written into new device blocks; then tier
   promotions, read and checked in full before any is written (`TierBlockError` otherwise);
2. forwards every scheduled chunk in one flat token stream through the decoder, with
   `PagedAttention` reading and writing the cache through each request's block table;
3. samples greedily, for chunks that reach the end of their known tokens, among the ids the
   engine's word tokenizer can decode (`[len(SPECIAL_TOKENS), VOCAB_SIZE)`);
4. waits for the device before returning: a block the engine frees after this step is never
   rewritten while a kernel of this step still reads it.

Token ids: the engine's tokenizer gives out-of-vocabulary words ids above VOCAB_SIZE; they are
folded into the model's vocabulary as `id % vocab_size`, deterministically.

Time: a step's duration is its measured wall time (`torch.timing = "measured"`, for live
serving), or what the sim time model prices it at (`"modeled"`: deterministic on a virtual
clock). Preemption choices (`prefill_time_s`, `transfer_time_s`) always use the sim model,
which a `kvgate calibrate` profile ties to this device.

Close the executor (`close`) when the engine stops: it removes the disk tier's directory.

Memory: the pool is allocated once from the engine's `MemoryPlan` and must cost exactly the
plan's bytes per token (so `kv_bytes_safety` must be 1.0). A CUDA out-of-memory during a step
raises `DeviceOutOfMemoryError`, which the engine turns into an `oom` event.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from record.errors import ConfigError, DeviceOutOfMemoryError, InvalidRequestError, TierBlockError
from reference_engine.catalog import DType
from reference_engine.config import EngineConfig, PolicyName
from reference_engine.config.engine_config import TorchTiming
from reference_engine.executors.base import ScheduledChunk, StepOutcome, StepPlan
from reference_engine.executors.sim import SimExecutor
from reference_engine.executors.torch_attention import PagedAttention, SeqSlice
from reference_engine.executors.torch_kv import PagedKVCache
from reference_engine.executors.torch_model import DecoderShape, LlamaDecoder, build_decoder, init_random_weights
from reference_engine.executors.torch_tiers import TierStore
from reference_engine.memory import GIB, MemoryPlan
from reference_engine.request import Request
from reference_engine.tokenizer import SPECIAL_TOKENS, VOCAB_SIZE

TORCH_DTYPES = {DType.FP32: torch.float32, DType.BF16: torch.bfloat16, DType.FP16: torch.float16}
FIRST_SAMPLED_ID = len(SPECIAL_TOKENS)


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"torch.device = {name!r} but this torch ({torch.__version__}) sees no CUDA device; "
            f"use 'cpu' or install a CUDA build of torch"
        )
    return device


def _dtype(dtype: DType, key: str) -> torch.dtype:
    if dtype not in TORCH_DTYPES:
        raise ConfigError(
            f"{key} = {dtype.value!r} is not supported by the torch executor; "
            f"use one of {', '.join(d.value for d in TORCH_DTYPES)}"
        )
    return TORCH_DTYPES[dtype]


def load_decoder(config: EngineConfig, plan: MemoryPlan, device: torch.device) -> LlamaDecoder:
    """The decoder `config` asks for: a local checkpoint, or the catalog shape with seeded weights."""
    dtype = _dtype(config.model.weight_dtype, "model.weight_dtype")
    if config.torch.checkpoint:
        from reference_engine.executors.torch_checkpoint import load_checkpoint

        return load_checkpoint(config.torch.checkpoint, plan.model, dtype, device)
    shape = DecoderShape.from_spec(plan.model, config.torch.rope_theta, config.torch.norm_eps)
    model = build_decoder(shape, dtype, device)
    init_random_weights(model, config.engine.seed)
    return model


class TorchExecutor:
    """Runs steps on a real model. Owns the model, the KV tensor, the host copies of swapped
    requests and the blocks of the tiers below the pool; the engine owns which block holds what."""

    name = "torch"
    max_steps_per_plan = 1  # every step is a real forward pass over the model: one per plan

    def __init__(self, config: EngineConfig, plan: MemoryPlan) -> None:
        if config.engine.kv_bytes_safety != 1.0:
            raise ConfigError(
                f"engine.kv_bytes_safety = {config.engine.kv_bytes_safety}: the torch executor "
                f"allocates real KV, so the plan must count real bytes; set it to 1.0"
            )
        self.device = resolve_device(config.torch.device)
        if self.device.type == "cpu" and config.torch.cpu_threads:
            torch.set_num_threads(config.torch.cpu_threads)
        self.model = load_decoder(config, plan, self.device)
        self._check_host_room(plan.num_blocks * plan.bytes_per_block)
        s = self.model.shape
        before = self._device_allocated()
        try:
            self.cache = PagedKVCache(
                num_layers=s.num_layers,
                num_blocks=plan.num_blocks,
                block_tokens=plan.block_tokens,
                num_kv_heads=s.num_kv_heads,
                head_dim=s.head_dim,
                dtype=_dtype(config.model.kv_dtype, "model.kv_dtype"),
                device=self.device,
            )
        except torch.OutOfMemoryError:
            raise ConfigError(
                f"the KV pool ({plan.num_blocks} blocks, {plan.pool_bytes / GIB:.2f} GiB) does not fit "
                f"on {self.device}; lower hardware.kv_pool_gib or gpu_memory_utilization"
            ) from None
        assert self.cache.bytes_per_token == plan.bytes_per_token, "the plan and the tensor disagree on KV bytes"
        # What the device allocator handed out for the pool (CUDA), or the tensor's own size (CPU).
        cuda = self.device.type == "cuda"
        self.allocated_pool_bytes = self._device_allocated() - before if cuda else self.cache.nbytes
        self._pricing = SimExecutor(config, plan)
        self._modeled = config.torch.timing is TorchTiming.MODELED
        self.record_attention = config.torch.record_attention or config.kv_cache.policy is PolicyName.H2O
        # greedy sampling picks among ids the engine's tokenizer decodes as words
        self.sampled_ids = range(FIRST_SAMPLED_ID, min(s.vocab_size, VOCAB_SIZE))
        if not self.sampled_ids:
            raise ConfigError(f"a vocabulary of {s.vocab_size} leaves no id to sample above the special tokens")
        self._host: dict[str, Tensor] = {}
        self.tiers = TierStore(self.cache, disk_parent=config.torch.disk_tier_dir or None)
        # Divergence measurement (`reference_engine.divergence`): the logits behind each sampled token,
        # per request id and output index, kept only while `keep_logits` is on.
        self.keep_logits = False
        self.logits: dict[str, dict[int, Tensor]] = {}

    def _check_host_room(self, pool_bytes: float) -> None:
        if self.device.type != "cpu":
            return
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):  # not every OS reports free pages; then trust the config
            return
        if pool_bytes > 0.8 * free:
            raise ConfigError(
                f"the KV pool ({pool_bytes / GIB:.2f} GiB) would take most of this machine's free "
                f"memory ({free / GIB:.2f} GiB); set hardware.kv_pool_gib for the torch executor on CPU"
            )

    def _device_allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0

    # ------------------------------------------------------------------ steps
    def execute(self, plan: StepPlan) -> StepOutcome:
        assert plan.num_steps == 1, "the torch executor runs one step per plan (max_steps_per_plan)"
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                self.tiers.apply_outbound(plan.tier_transfers, plan.tier_drops)
                self._compact(plan)
                self._swap(plan)
                failed_promotions = self.tiers.apply_promotions(plan.tier_transfers)
                if failed_promotions:
                    _refuse_unwritten(plan.chunks, failed_promotions)
                sampled, attention = self._forward(plan.chunks)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except torch.OutOfMemoryError as err:
            torch.cuda.empty_cache()
            raise DeviceOutOfMemoryError(
                f"{self.device} ran out of memory in a step of {plan.num_tokens} tokens "
                f"over {len(plan.chunks)} sequences: {err}"
            ) from None
        duration = self._pricing.execute(plan).duration_s if self._modeled else time.perf_counter() - t0
        return StepOutcome([duration], sampled, attention, frozenset(failed_promotions))

    def _compact(self, plan: StepPlan) -> None:
        if not plan.compactions:
            return
        src, dst = [], []
        for c in plan.compactions:
            table = torch.tensor(c.block_ids)[None]
            moved = torch.as_tensor(c.src, dtype=torch.long)
            src.append(self.cache.slots(table, moved[None])[0])
            dst.append(self.cache.slots(table, torch.arange(c.dst_start, c.dst_start + len(moved))[None])[0])
        self.cache.move(torch.cat(src).to(self.device), torch.cat(dst).to(self.device))

    def _swap(self, plan: StepPlan) -> None:
        for copy in plan.swap_out:
            self._host[copy.request.request_id] = self.cache.copy_out(copy.device_blocks)
        for copy in plan.swap_in:
            self.cache.copy_in(self._host.pop(copy.request.request_id), copy.device_blocks)

    def _forward(self, chunks: Sequence[ScheduledChunk]) -> tuple[list[list[int]], dict[str, list[float]] | None]:
        if not chunks:
            return [], None
        vocab = self.model.shape.vocab_size
        ids: list[int] = []
        positions: list[int] = []
        seqs: list[SeqSlice] = []
        for c in chunks:
            r, n = c.request, c.num_new_tokens
            ids.extend(t % vocab for t in _token_slice(r, r.num_computed_tokens, n))
            positions.extend(range(r.num_computed_tokens, r.num_computed_tokens + n))
            seqs.append(SeqSlice(r.block_ids, r.num_kv_tokens, n))
        attend = PagedAttention(self.cache, seqs, record_mass=self.record_attention)
        dev = self.device
        hidden = self.model.hidden_states(torch.tensor(ids, device=dev), torch.tensor(positions, device=dev), attend)
        last_rows, end = [], 0
        for c in chunks:
            end += c.num_new_tokens
            if c.samples:
                last_rows.append(end - 1)
        sampled: list[list[int]] = [[] for _ in chunks]
        if last_rows:
            logits = self.model.logits(hidden[torch.tensor(last_rows, device=dev)])
            lo, hi = self.sampled_ids.start, self.sampled_ids.stop
            tokens = (logits[:, lo:hi].argmax(dim=-1) + lo).tolist()
            sampling = [i for i, c in enumerate(chunks) if c.samples]
            for row, (i, token) in enumerate(zip(sampling, tokens)):
                sampled[i] = [token]
                if self.keep_logits:
                    r = chunks[i].request
                    self.logits.setdefault(r.request_id, {})[r.num_output_tokens] = logits[row].cpu()
        attention = None
        if self.record_attention:
            attention = {c.request.request_id: m for c, m in zip(chunks, attend.attention_mass())}
        return sampled, attention

    def forget(self, request_id: str) -> None:
        """A request that ended while swapped out leaves its host copy here: drop it."""
        self._host.pop(request_id, None)
        self._pricing.forget(request_id)

    def close(self) -> None:
        """The engine stopped: forget the tiers' blocks and remove the disk tier's directory."""
        self.tiers.close()

    def export_blocks(self, block_ids: Sequence[int]) -> Tensor:
        """The blocks' K and V in host memory, as a P/D connector stages them for the link."""
        return self.cache.copy_out(block_ids)

    def import_blocks(self, data: object, block_ids: Sequence[int]) -> None:
        assert isinstance(data, Tensor), "a P/D pull lands what a torch executor exported"
        self.cache.copy_in(data, block_ids)

    # ----------------------------------------------------------- time model
    def prefill_time_s(self, num_tokens: int, num_cached_tokens: int = 0) -> float:
        return self._pricing.prefill_time_s(num_tokens, num_cached_tokens)

    def transfer_time_s(self, num_bytes: float) -> float:
        return self._pricing.transfer_time_s(num_bytes)

    # ------------------------------------------------------------ inspection
    @property
    def pool_bytes(self) -> int:
        """Bytes of the KV pool tensor: exactly `num_blocks × bytes_per_block` of the plan."""
        return self.cache.nbytes


def _token_slice(r: Request, start: int, n: int) -> list[int]:
    """Tokens `start .. start + n - 1` of prompt + output, without copying the whole sequence."""
    prompt = r.prompt_token_ids
    if prompt is None:
        raise InvalidRequestError(
            f"request {r.request_id!r} has a token count but no token ids; the torch executor "
            f"needs real prompt ids (replay traces without text run on the sim executor)",
            param="prompt_token_ids",
        )
    end = start + n
    if end <= len(prompt):
        return prompt[start:end]
    return prompt[start:] + r.output_token_ids[max(0, start - len(prompt)) : end - len(prompt)]


def _refuse_unwritten(chunks: Sequence[ScheduledChunk], failed: Mapping[int, int]) -> None:
    """A wrong block is never served: the engine computes nothing over blocks still loading, so a
    chunk reading a block whose promotion failed means it did not wait, and the step stops."""
    unwritten = set(failed.values())
    for c in chunks:
        if not unwritten.isdisjoint(c.request.block_ids):
            raise TierBlockError(
                f"request {c.request.request_id} would read a block its promotion did not bring back",
                tier="gpu",
                key=next(k for k, b in failed.items() if b in c.request.block_ids),
            )
