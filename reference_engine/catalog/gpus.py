"""GPU catalog: the peak figures the roofline time model divides by.

Sources are NVIDIA's data sheets (dense, i.e. without 2:4 sparsity) and the memory size that
`nvidia-smi` reports, which is what a KV pool is carved from.
"""

from __future__ import annotations

from dataclasses import dataclass

from record.errors import UnknownNameError

_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class GpuSpec:
    name: str
    bf16_tflops: float  # dense tensor-core peak, TFLOP/s
    hbm_gbps: float  # memory bandwidth, GB/s (1e9 bytes)
    memory_bytes: int  # as nvidia-smi reports the total
    host_link_gbps: float  # one direction, GB/s: what a swap to host memory moves at, at best
    source: str = ""


GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        # NVIDIA A100 data sheet (SXM4 80GB): 312 TFLOP/s bf16 dense, 2,039 GB/s HBM2e;
        # nvidia-smi total 81,920 MiB; PCIe Gen4 x16 = 32 GB/s per direction.
        GpuSpec("a100-80g", 312.0, 2_039.0, 81_920 * _MIB, 32.0, "nvidia.com A100 datasheet"),
        # NVIDIA H100 data sheet (SXM5): 989 TFLOP/s bf16 dense, 3.35 TB/s HBM3;
        # nvidia-smi total 81,559 MiB; PCIe Gen5 x16 = 64 GB/s per direction.
        GpuSpec("h100-sxm", 989.0, 3_350.0, 81_559 * _MIB, 64.0, "nvidia.com H100 datasheet"),
        # NVIDIA H200 data sheet (SXM): 989 TFLOP/s bf16 dense, 4.8 TB/s HBM3e, 141 GB;
        # nvidia-smi total 143,771 MiB; PCIe Gen5 x16 = 64 GB/s per direction.
        GpuSpec("h200", 989.0, 4_800.0, 143_771 * _MIB, 64.0, "nvidia.com H200 datasheet"),
    )
}


def get_gpu(name: str) -> GpuSpec:
    try:
        return GPUS[name]
    except KeyError:
        raise UnknownNameError("gpu", name, GPUS) from None
