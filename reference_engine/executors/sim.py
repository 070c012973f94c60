"""The simulated executor: a calibrated roofline time model and deterministic fake tokens.

A step of T new tokens over a batch is priced as

    compute = (2 · params · T  +  4 · layers · heads · head_dim · Σ attended pairs) / (peak · MFU)
    memory  = (weight bytes  +  KV bytes read  +  KV bytes written) / (HBM bandwidth · MBU)
    step    = max(compute, memory) + fixed per-step overhead

so prefill is compute-bound and decode memory-bound, as on real GPUs. Defaults: MFU 0.65 and
MBU 0.70 (public vLLM/TensorRT-LLM profiling of linear layers and decode on Hopper) and a 1.7 ms
fixed cost, which together give the published anchor of ≈ 6.5 ms per decode step for
Llama-3-8B at small batch on an H200 (16.1 GB of weights / (4.8 TB/s · 0.70) = 4.8 ms + 1.7 ms).
A profile written by `kvgate calibrate` replaces the three constants with measured ones.

A plan that holds for k steps is priced step by step from the same integer sums one step forms
(a chunk of c tokens over s held KV tokens attends c·s + c(c+1)/2 pairs, and in the next step
starts at s + c), so its durations are the floats stepping one by one gives.

Output tokens are a pure function of (request id, position), so every run is reproducible and
a preempted-and-recomputed request produces the same text as an uninterrupted one. Under h2o the
sim also returns a synthetic attention distribution (`sim_attention`) for the policy to rank
tokens by; token-level compactions (`StepPlan.compactions`) move no data here and cost nothing.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from reference_engine.config import EngineConfig, PolicyName
from reference_engine.executors.base import ScheduledChunk, StepOutcome, StepPlan
from reference_engine.executors.sim_attention import SyntheticAttention
from reference_engine.memory import MemoryPlan
from reference_engine.stable_id import stable_id
from reference_engine.tokenizer import SPECIAL_TOKENS, VOCAB_SIZE

_GEN_LO = len(SPECIAL_TOKENS)
_GEN_SPAN = VOCAB_SIZE - _GEN_LO


def _token_table(size: int) -> list[int]:
    """`size` well-mixed generatable token ids (splitmix-style multiply-xorshift of the index)."""
    x = np.arange(size, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(31))) * np.uint64(0xBF58476D1CE4E5B9)
    return ((x >> np.uint64(31)) % np.uint64(_GEN_SPAN) + np.uint64(_GEN_LO)).tolist()


# A request's tokens are a window into one fixed pseudo-random sequence, starting at an offset
# its seed picks: a token costs a list index, and the tokens of a plan run k times one slice
# (replay appends about 1.5 million of them). The period, 65,536 tokens, is beyond any answer's length.
_TABLE_BITS = 16
_TABLE_MASK = (1 << _TABLE_BITS) - 1
_TOKENS = _token_table(1 << _TABLE_BITS)


def fake_token(request_seed: int, position: int) -> int:
    """A deterministic generated token id for a request at an absolute position."""
    return _TOKENS[(request_seed + position) & _TABLE_MASK]


def fake_tokens(request_seed: int, position: int, num: int) -> list[int]:
    """`fake_token` at positions position .. position + num - 1, as one slice of the table."""
    lo = (request_seed + position) & _TABLE_MASK
    out = _TOKENS[lo : lo + num]
    while len(out) < num:  # the window wraps around the table's end
        out += _TOKENS[: num - len(out)]
    return out


class SimExecutor:
    name = "sim"
    max_steps_per_plan = 4096  # bounds the lists one plan's outcome holds

    def __init__(self, config: EngineConfig, plan: MemoryPlan) -> None:
        sim = config.sim
        mfu, mbu, overhead_ms = sim.mfu, sim.mbu, sim.step_overhead_ms
        if sim.profile:
            prof = tomllib.loads(Path(sim.profile).read_text())
            mfu, mbu, overhead_ms = (
                prof.get("mfu", mfu),
                prof.get("mbu", mbu),
                prof.get("step_overhead_ms", overhead_ms),
            )
        m, g = plan.model, plan.gpu
        self._flops_per_s = g.bf16_tflops * 1e12 * mfu
        self._bytes_per_s = g.hbm_gbps * 1e9 * mbu
        self._link_bytes_per_s = g.host_link_gbps * 1e9
        self._overhead_s = overhead_ms / 1000
        self._linear_flops_per_token = 2 * m.num_params
        self._attn_flops_per_pair = 4 * m.num_layers * m.num_attention_heads * m.head_dim
        self._weight_bytes = plan.weight_bytes
        self._kv_bytes_per_token = plan.bytes_per_token
        self._seeds: dict[str, int] = {}
        self.record_attention = config.kv_cache.policy is PolicyName.H2O

    def _seed(self, request_id: str) -> int:
        seed = self._seeds.get(request_id)
        if seed is None:
            seed = self._seeds[request_id] = stable_id(request_id)
        return seed

    def forget(self, request_id: str) -> None:
        self._seeds.pop(request_id, None)

    def close(self) -> None:
        """Nothing to release: the sim holds no KV, files or devices."""

    def export_blocks(self, block_ids: Sequence[int]) -> None:
        """No KV bytes to send: the link's time is the whole of a sim transfer."""

    def import_blocks(self, data: object, block_ids: Sequence[int]) -> None:
        """No KV bytes to write."""

    def _step_s(self, new_tokens: int, attended_pairs: float, kv_read_tokens: float) -> float:
        compute = (
            self._linear_flops_per_token * new_tokens + self._attn_flops_per_pair * attended_pairs
        ) / self._flops_per_s
        memory = (self._weight_bytes + self._kv_bytes_per_token * (kv_read_tokens + new_tokens)) / self._bytes_per_s
        return max(compute, memory) + self._overhead_s

    def execute(self, plan: StepPlan) -> StepOutcome:
        new = pairs = read = pairs_growth = 0
        for chunk in plan.chunks:
            r, n = chunk.request, chunk.num_new_tokens
            start = r.num_computed_tokens - r.num_dropped_tokens
            new += n
            pairs += n * start + n * (n + 1) // 2
            read += start
            pairs_growth += n * n  # in the next step it starts n further on
        transfer_s = self.transfer_time_s(
            sum(c.num_bytes for c in plan.swap_out) + sum(c.num_bytes for c in plan.swap_in)
        )
        if not plan.chunks:
            return StepOutcome([self._overhead_s + transfer_s], [])
        durations, t = [], plan.start_s
        for k in range(plan.num_steps):
            if k and not t < plan.stop_s:
                break
            d = self._step_s(new, pairs + k * pairs_growth, read + k * new) + transfer_s
            durations.append(d)
            t = t + d
        sampled = [self._sampled(chunk, len(durations)) for chunk in plan.chunks]
        return StepOutcome(durations, sampled, self._attention(plan) if self.record_attention else None)

    def _sampled(self, chunk: ScheduledChunk, num_steps: int) -> list[int]:
        """The tokens `chunk` samples over `num_steps` steps: from the first whose end reaches
        the request's known tokens on, one per step at the position it ends on."""
        r, n = chunk.request, chunk.num_new_tokens
        end = r.num_computed_tokens + n
        before = max(0, -(-(r.num_prompt_tokens + len(r.output_token_ids) - end) // n))  # steps that do not sample
        if before >= num_steps:
            return []
        assert n == 1 or before == num_steps - 1, "a chunk past its known tokens samples one token per step"
        return fake_tokens(self._seed(r.request_id), end + before * n, num_steps - before)

    def _attention(self, plan: StepPlan) -> dict[str, SyntheticAttention]:
        """Synthetic attention of each scheduled request over its KV after the step (a closed form
        h2o accumulates without materialising it)."""
        return {
            c.request.request_id: SyntheticAttention(self._seed(c.request.request_id), c.num_new_tokens)
            for c in plan.chunks
        }

    def prefill_time_s(self, num_tokens: int, num_cached_tokens: int = 0) -> float:
        n, s = num_tokens, num_cached_tokens
        return self._step_s(n, n * s + n * (n + 1) / 2, s) - self._overhead_s

    def transfer_time_s(self, num_bytes: float) -> float:
        return num_bytes / self._link_bytes_per_s
