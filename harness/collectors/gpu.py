"""GPU memory through NVML (pynvml, the nvidia-ml-py package), where NVML exists.

Where it does not (no driver, no GPU, a container without the library) the sampler is
`available = False` with the reason, and the run record says `signals.gpu_memory = false`:
absent, never zero. NVML reports the device's memory, whatever process holds it.
"""

from __future__ import annotations

from typing import Any


class GpuSampler:
    """One device's used and total memory. `name` and `reason` say what was found."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.available = False
        self.name = ""
        self.reason = ""
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml
        except ImportError as err:
            self.reason = f"pynvml is not installed ({err})"
            return
        try:
            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(self._handle)
        except pynvml.NVMLError as err:
            self.reason = f"NVML unavailable: {err}"
            return
        self._nvml = pynvml
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.available = True

    def sample(self) -> tuple[int, int] | None:
        """(used bytes, total bytes), or None when unavailable."""
        if not self.available:
            return None
        try:
            info = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
        except self._nvml.NVMLError as err:
            self.available, self.reason = False, f"NVML stopped answering: {err}"
            return None
        return int(info.used), int(info.total)

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass
            self._nvml = None
