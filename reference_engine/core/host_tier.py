"""The host-memory tier that swapped-out KV lives in while its request waits.

Capacity is `preemption.host_swap_gib`; a swap-out that does not fit falls back to recompute.
The tier tracks bytes only: the sim executor prices the copies, the torch executor performs them.
"""

from __future__ import annotations


class HostTier:
    def __init__(self, capacity_bytes: float) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0.0
        self.total_swapped_out_bytes = 0.0
        self.total_swapped_in_bytes = 0.0

    def can_hold(self, num_bytes: float) -> bool:
        return self.used_bytes + num_bytes <= self.capacity_bytes

    def store(self, num_bytes: float) -> None:
        assert self.can_hold(num_bytes)
        self.used_bytes += num_bytes
        self.total_swapped_out_bytes += num_bytes

    def load(self, num_bytes: float) -> None:
        self.used_bytes = max(0.0, self.used_bytes - num_bytes)
        self.total_swapped_in_bytes += num_bytes

    def drop(self, num_bytes: float) -> None:
        """Forget swapped KV whose request ended while swapped out."""
        self.used_bytes = max(0.0, self.used_bytes - num_bytes)
