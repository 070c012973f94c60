from __future__ import annotations

import sys
import types

import pytest

from harness.collectors.gpu import GpuSampler


class NVMLError(Exception):
    pass


def fake_pynvml(*, fail_init: bool) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError

    def init() -> None:
        if fail_init:
            raise NVMLError("NVML Shared Library Not Found")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=10 << 30, total=80 << 30)
    return m


def test_without_nvml_the_sampler_is_cleanly_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    gpu = GpuSampler()
    assert not gpu.available and "NVML" in gpu.reason and gpu.sample() is None
    gpu.close()


def test_with_nvml_it_reads_used_and_total_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=False))
    gpu = GpuSampler()
    assert gpu.available and gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.sample() == (10 << 30, 80 << 30)
    gpu.close()


def test_on_this_machine_it_never_raises() -> None:
    gpu = GpuSampler()
    assert gpu.available == (gpu.sample() is not None)
    gpu.close()
