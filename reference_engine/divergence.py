"""How far an approximate policy (streamingllm, h2o) drifts from exact decoding, measured.

The approximate run is replayed *teacher-forced* against the exact model: for every output
token the approximate engine produced, the same weights recompute the logits densely over the
full, uncompressed prefix of prompt + earlier outputs (`DenseAttention`). Comparing at the same
prefix isolates what the dropped KV changed, instead of comparing two texts that diverged once
and then differ everywhere. Per run:

- `token_agreement`: the share of output tokens the exact model would also have chosen greedily;
- `mean_kl` / `max_kl`: KL(exact ‖ approximate) in nats per output token, over the ids the
  executor samples from.

An exact policy measures agreement 1 and a KL at float-rounding level; any dropped KV shows up.
Use: set `executor.keep_logits = True` before the run (or call `run_prompts`, or
`measure_policy_divergence` for both steps), then pass the finished requests to
`measure_divergence`; the result goes into the run record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from reference_engine.clock import VirtualClock
from reference_engine.config import EngineConfig, with_overrides
from reference_engine.executors.torch_attention import DenseAttention
from reference_engine.executors.torch_executor import TorchExecutor
from reference_engine.request import Request


@dataclass(frozen=True, slots=True)
class Divergence:
    num_requests: int
    num_tokens: int
    token_agreement: float
    mean_kl: float
    max_kl: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def dense_logits(executor: TorchExecutor, token_ids: Sequence[int]) -> Tensor:
    """Logits [T, vocab] of one whole sequence through the exact model, no cache involved."""
    model, dev = executor.model, executor.device
    vocab = model.shape.vocab_size
    with torch.inference_mode():
        ids = torch.tensor([t % vocab for t in token_ids], device=dev)
        hidden = model.hidden_states(ids, torch.arange(len(ids), device=dev), DenseAttention())
        return model.logits(hidden)


def measure_divergence(executor: TorchExecutor, requests: Iterable[Request]) -> Divergence:
    """Compare the kept logits of finished requests with exact teacher-forced logits."""
    lo, hi = executor.sampled_ids.start, executor.sampled_ids.stop
    agree = count = n_req = 0
    kls: list[Tensor] = []
    for r in requests:
        kept = executor.logits.pop(r.request_id, {})
        outputs = r.output_token_ids
        if not kept or not outputs or r.prompt_token_ids is None:
            continue
        n_req += 1
        seq = r.prompt_token_ids + outputs[:-1]
        exact = dense_logits(executor, seq)[len(r.prompt_token_ids) - 1 :].cpu()
        index = sorted(j for j in kept if j < len(outputs))
        approx = torch.stack([kept[j] for j in index])[:, lo:hi].log_softmax(-1)
        ref = exact[index][:, lo:hi].log_softmax(-1)
        kls.append((ref.exp() * (ref - approx)).sum(-1).clamp_min(0.0))
        chosen = ref.argmax(-1) + lo
        agree += int((chosen == torch.tensor([outputs[j] for j in index])).sum())
        count += len(index)
    kl = torch.cat(kls) if kls else torch.zeros(0)
    return Divergence(
        num_requests=n_req,
        num_tokens=count,
        token_agreement=agree / count if count else 1.0,
        mean_kl=float(kl.mean()) if count else 0.0,
        max_kl=float(kl.max()) if count else 0.0,
    )


def run_prompts(
    config: EngineConfig, prompts: Sequence[Sequence[int]], max_new_tokens: int, tenant: str | None = None
) -> tuple[TorchExecutor, list[Request]]:
    """Run `prompts` through an engine with `config` (its policy, the torch executor) on a virtual
    clock, one request at a time, keeping every output's logits; returns the executor (which
    holds them) and the finished requests."""
    from reference_engine.core.engine import EngineCore

    config = with_overrides(config, {"engine.executor": "torch", "torch.timing": "modeled"})
    clock = VirtualClock()
    core = EngineCore(config, clock=clock)
    executor = core.executor
    assert isinstance(executor, TorchExecutor)
    executor.keep_logits = True
    tenant = tenant or next(iter(core.tenants)).name
    done = []
    for prompt in prompts:
        done.append(core.add_request(tenant=tenant, prompt_token_ids=list(prompt), max_new_tokens=max_new_tokens))
        while core.has_work():
            clock.advance_to(core.step().t_end_s)
    return executor, done


def measure_policy_divergence(
    config: EngineConfig, prompts: Sequence[Sequence[int]], max_new_tokens: int, tenant: str | None = None
) -> Divergence:
    """Run `prompts` (`run_prompts`) and measure the outputs against exact decoding."""
    return measure_divergence(*run_prompts(config, prompts, max_new_tokens, tenant))
