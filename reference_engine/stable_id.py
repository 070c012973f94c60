"""Process-independent ids: the same string gives the same integer in every process and run.

Python's `hash(str)` is salted per process, so anything that must agree across processes or
reruns (prefix-hash scopes, the simulator's per-request seeds, replay's tenant assignment) uses
this instead.
"""

from __future__ import annotations

import hashlib


def stable_id(text: str) -> int:
    """A process-independent 63-bit integer for a string (Python's str hash is salted)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1
