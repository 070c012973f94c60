"""Lines in an inference server's log that say it ran out of memory, or came close.

One catalogue, read by the log tail (target_log.py) and repeated for readers in
docs/targets.md. A pattern is an OOM (`is_oom`: an allocation failed, and requests or the whole
engine failed with it: `no_oom` counts it) or pressure (the engine ran short and coped: a retry
with a smaller batch, a retraction; reported beside the verdict, never counted as an OOM, like
a preemption). The first pattern a line matches names it; matching ignores case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LogPattern:
    name: str
    regex: re.Pattern[str]
    is_oom: bool
    who: str
    """Which engines write it, and when (docs)."""

    @property
    def kind(self) -> str:
        """The `mode` of its `log_match` events: oom | pressure."""
        return "oom" if self.is_oom else "pressure"


def _pattern(name: str, regex: str, is_oom: bool, who: str) -> LogPattern:
    return LogPattern(name, re.compile(regex, re.IGNORECASE), is_oom, who)


LOG_PATTERNS: tuple[LogPattern, ...] = (
    _pattern("torch_oom", r"torch\.(?:cuda\.)?OutOfMemoryError", True, "PyTorch engines (vLLM, SGLang)"),
    _pattern(
        "cuda_oom",
        r"\b(?:CUDA|HIP) out of memory|CUDA error: out of memory|cudaErrorMemoryAllocation"
        r"|CUBLAS_STATUS_ALLOC_FAILED|CUDA runtime error.{0,200}out of memory",
        True,
        "any engine on CUDA or ROCm (TensorRT-LLM's runtime errors among them)",
    ),
    _pattern(
        "vllm_no_cache_memory",
        r"No available memory for the cache blocks",
        True,
        "vLLM at start: an engine that restarted and no longer fits",
    ),
    _pattern("sglang_oom", r"\b(?:Prefill|Decode) out of memory(?! happened)", True, "SGLang: an allocation failed"),
    _pattern(
        "llamacpp_decode_failed",
        r"failed to decode the batch(?!, retrying)|decode\(\) failed|Context size has been exceeded|KV cache is full",
        True,
        "llama.cpp: no room in the KV cache even for one token; the requests in flight fail",
    ),
    _pattern("host_oom", r"std::bad_alloc|\bMemoryError\b", True, "host memory (C++ and Python)"),
    _pattern(
        "llamacpp_kv_retry",
        r"failed to find free space in the KV cache",
        False,
        "llama.cpp: no room for a batch; it retries with half the batch",
    ),
    _pattern(
        "sglang_retract",
        r"Decode out of memory happened",
        False,
        "SGLang: not enough KV for the next decode; it retracts requests (its preemption)",
    ),
    _pattern("vllm_preempted", r"is preempted by PreemptionMode", False, "vLLM V0: a preemption for KV space"),
)


def match_line(line: str) -> LogPattern | None:
    """The first pattern the line matches, or None."""
    return next((p for p in LOG_PATTERNS if p.regex.search(line)), None)
