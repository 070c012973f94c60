"""The server's log, tailed for OOM and pressure lines: names and times only, never the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.collectors.log_patterns import LOG_PATTERNS, match_line
from harness.collectors.target_log import LogTail

SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "torch_oom"),
        ("RuntimeError: CUDA error: out of memory", "cuda_oom"),
        ("[TensorRT-LLM][ERROR] CUDA runtime error in cudaMallocAsync(ptr, n): out of memory", "cuda_oom"),
        (
            "ValueError: No available memory for the cache blocks. Try increasing gpu_memory_utilization",
            "vllm_no_cache_memory",
        ),
        ("RuntimeError: Prefill out of memory. Try to lower your batch size.", "sglang_oom"),
        ("update_slots: failed to decode the batch: KV cache is full - try increasing it", "llamacpp_decode_failed"),
        ("srv send_error: task id = 7, error: Context size has been exceeded.", "llamacpp_decode_failed"),
        ("terminate called after throwing an instance of 'std::bad_alloc'", "host_oom"),
        (
            "update_slots: failed to find free space in the KV cache, retrying with smaller batch size",
            "llamacpp_kv_retry",
        ),
        ("[2026-12-01 10:00:00 TP0] Decode out of memory happened. #retracted_reqs: 1", "sglang_retract"),
        ("Sequence group 3 is preempted by PreemptionMode.RECOMPUTE mode", "vllm_preempted"),
    ],
)
def test_each_known_line_is_named_by_its_pattern(line: str, name: str) -> None:
    assert (pattern := match_line(line)) is not None and pattern.name == name


def test_pressure_lines_are_not_ooms_and_ordinary_lines_match_nothing() -> None:
    kinds = {p.name: p.kind for p in LOG_PATTERNS}
    assert kinds["llamacpp_kv_retry"] == kinds["sglang_retract"] == kinds["vllm_preempted"] == "pressure"
    assert kinds["torch_oom"] == kinds["llamacpp_decode_failed"] == "oom"
    assert match_line("update_slots: failed to decode the batch, retrying with n_batch = 256") is None
    assert match_line('INFO: 127.0.0.1 - "POST /v1/chat/completions HTTP/1.1" 200 OK') is None


def test_only_lines_written_during_the_run_count_and_nothing_of_them_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory (an old run)\n")
    tail = LogTail(log)
    with log.open("a") as f:
        f.write(f"Authorization: Bearer {SECRET} -> torch.OutOfMemoryError: CUDA out of memory\n")
        f.write("failed to find free space in the KV cache, retrying\n")
        f.write("Context size has been exc")  # a line still being written
    rows = tail.poll(12.5)
    assert [(r["t_s"], r["kind"], r["reason"], r["mode"]) for r in rows] == [
        (12.5, "log_match", "torch_oom", "oom"),
        (12.5, "log_match", "llamacpp_kv_retry", "pressure"),
    ]
    assert SECRET not in repr(rows) and SECRET not in tail.status().detail
    with log.open("a") as f:
        f.write("eeded.\n")
    assert [r["reason"] for r in tail.poll(13.0)] == ["llamacpp_decode_failed"]
    status = tail.status()
    assert status.available and "3 lines" in status.detail and "torch_oom 1" in status.detail
    tail.close()


def test_a_truncated_log_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("x" * 1000 + "\n")
    tail = LogTail(log)
    log.write_text("RuntimeError: CUDA error: out of memory\n")  # shorter than where the tail was
    assert [r["reason"] for r in tail.poll(1.0)] == ["cuda_oom"]
    tail.close()


def test_a_log_that_cannot_be_read_is_not_available(tmp_path: Path) -> None:
    tail = LogTail(tmp_path / "missing.log")
    assert tail.poll(1.0) == []
    status = tail.status()
    assert not status.available and "cannot read" in status.detail
