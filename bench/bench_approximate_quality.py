"""How close the approximate policies' answers are to the exact ones, on the torch executor.

    .venv/bin/python bench/bench_approximate_quality.py                          # kvgate-small, CPU
    .venv/bin/python bench/bench_approximate_quality.py --device cuda --prompts 32

A fixed prompt set (seeded token ids; lengths spread evenly from just past streamingllm's window
to the critical bound of the gates' `[slo]`, 4,096 tokens, or the model's context less the
answer: chat prompts long enough to be compressed) runs one request at a time, greedy, through the
same model three times: exactly
(`lru`, configs/default.toml) and under the policy settings of configs/streamingllm.toml and
configs/h2o.toml. Against the exact answer, per policy:

    token agreement     share of output positions whose token equals the exact answer's
    first divergence    output index where the answer first differs (median over prompts;
                        "identical" counts as the full length)
    identical answers   prompts answered exactly as the exact run did
    teacher-forced      given the exact prefix at every step (reference_engine/divergence.py): the share of
                        steps whose greedy choice matches, and the mean KL(exact ‖ approximate)

Free-running agreement is what a user sees: once an answer diverges it usually stays apart.
Teacher-forced agreement isolates what the dropped KV changes at one step. Weights are random
(seeded by `engine.seed`) unless `--checkpoint` names a local model of the same shape: the
figures measure the policies on this model's attention, not a trained model's.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gates import load_thresholds  # noqa: E402
from record.query import percentile  # noqa: E402
from reference_engine import EngineConfig, load_config, with_overrides  # noqa: E402
from reference_engine.catalog import DType, get_model  # noqa: E402
from reference_engine.memory import GIB  # noqa: E402

POLICIES = {
    "exact (lru)": "configs/default.toml",
    "streamingllm": "configs/streamingllm.toml",
    "h2o": "configs/h2o.toml",
}
BLOCK_TOKENS = 16
NUM_BLOCKS = 2048  # room for the longest prompt and answer twice over: no pressure, no preemption


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="kvgate-small")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--checkpoint", default="", help="local Hugging Face model directory (default: random weights)")
    p.add_argument("--prompts", type=int, default=8, help="prompts in the set")
    p.add_argument("--new", type=int, default=64, help="output tokens per prompt")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    return p.parse_args()


def prompt_set(num: int, shortest: int, longest: int, vocab: int) -> list[list[int]]:
    """`num` prompts, lengths evenly from `shortest` to `longest`, token ids seeded."""
    rng = random.Random(2026)
    step = (longest - shortest) / max(1, num - 1)
    return [[rng.randrange(5, vocab) for _ in range(round(shortest + i * step))] for i in range(num)]


def engine_config(path: str, args: argparse.Namespace) -> EngineConfig:
    """The config at `path` (its policy and policy settings) on the torch executor, one request at a time."""
    bytes_per_block = get_model(args.model).kv_bytes_per_token(DType(args.dtype)) * BLOCK_TOKENS
    overrides: dict[str, Any] = {
        "model.name": args.model,
        "model.weight_dtype": args.dtype,
        "model.kv_dtype": args.dtype,
        "binding.gpu_sku": "",
        "engine.executor": "torch",
        "torch.device": args.device,
        "torch.checkpoint": args.checkpoint,
        "torch.cpu_threads": args.threads,
        "hardware.kv_pool_gib": (NUM_BLOCKS + 0.5) * bytes_per_block / GIB,
        "engine.max_num_seqs": 1,
        "engine.max_num_batched_tokens": 512,
        "engine.long_prefill_token_threshold": 512,
        "admission.enabled": False,
        "prefix_cache.public_prefixes": [],
        "tenants": {"bench": {"api_keys": ["sk-bench"], "max_kv_share": 1.0}},
    }
    return with_overrides(load_config(REPO / path), overrides)


def first_divergence(answer: list[int], exact: list[int]) -> int:
    """The first output index where `answer` differs from `exact` (their common length if none)."""
    return next((i for i, (a, b) in enumerate(zip(answer, exact)) if a != b), min(len(answer), len(exact)))


def main() -> None:
    args = _parse()
    # torch is the optional extra: imported here, so that --help works without it
    from reference_engine.divergence import measure_divergence, run_prompts

    streaming = load_config(REPO / POLICIES["streamingllm"]).streamingllm
    shortest = streaming.sink_tokens + streaming.sliding_window_tokens + 4 * BLOCK_TOKENS
    model = get_model(args.model)
    longest = min(int(load_thresholds().objective["critical_max_prompt_tokens"]), model.max_context_tokens - args.new)
    prompts = prompt_set(args.prompts, shortest, longest, model.vocab_size)
    print(
        f"{args.model} ({args.checkpoint or 'random weights'}), {args.dtype} on {args.device}: "
        f"{len(prompts)} prompts of {len(prompts[0])}-{len(prompts[-1])} tokens, {args.new} output tokens each"
    )
    exact: list[list[int]] = []
    print(
        f"{'policy':14s} {'token agreement':>16s} {'first divergence (median)':>26s} {'identical':>10s} "
        f"{'teacher-forced agreement':>25s} {'mean KL':>9s}"
    )
    for label, path in POLICIES.items():
        executor, done = run_prompts(engine_config(path, args), prompts, args.new)
        answers = [r.output_token_ids for r in done]
        exact = exact or answers
        agree = sum(a == b for answer, ref in zip(answers, exact) for a, b in zip(answer, ref))
        total = sum(len(ref) for ref in exact)
        firsts = [first_divergence(answer, ref) for answer, ref in zip(answers, exact)]
        forced = measure_divergence(executor, done)
        print(
            f"{label:14s} {agree / total:16.1%} {percentile(firsts, 50):26.0f} "
            f"{sum(f == len(ref) for f, ref in zip(firsts, exact)):>6d}/{len(exact):<3d} "
            f"{forced.token_agreement:25.1%} {forced.mean_kl:9.4f}"
        )
        print(
            f"{'':14s} first divergence per prompt: {firsts}; approximate answers: "
            f"{sum(r.approximate for r in done)}/{len(done)}"
        )


if __name__ == "__main__":
    main()
