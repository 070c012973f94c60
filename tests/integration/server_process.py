"""Start `kvgate serve` as a subprocess on a free port for integration tests, and stop it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from harness.target import ReferenceEngine
from tests.waiting import wait_for

ADMIN_KEY = "sk-test-admin-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

# A test-sized model on a 65,536-block pool: steps cost `step_overhead_ms`, so streams are paced
# like a real engine's but short. Tenants may run many sequences at once; `tiny` may hold nothing.
SYSTEM_PROMPT = (
    "You are a helpful assistant . Answer briefly and precisely , cite sources when you can , and say "
    "so when you do not know . Keep every answer short ."
)
CONFIG_TOML = """
[model]
name = "kvgate-tiny"

[hardware]
gpu = "h100-sxm"
kv_pool_gib = 0.25

[sim]
step_overhead_ms = {step_ms}

[admission]
max_new_tokens_default = 32

[[prefix_cache.public_prefixes]]
name = "system"
text = "{system}"
pinned = true

[tenants.acme]
api_keys = ["sk-acme"]
max_active_seqs = 1000
max_kv_share = 0.5

[tenants.globex]
api_keys = ["sk-globex"]
max_active_seqs = 1000
max_kv_share = 0.5

[tenants.tiny]
api_keys = ["sk-tiny"]
max_kv_share = 0.00001
"""


@contextmanager
def running_server(
    tmp_dir: Path,
    *,
    workers: int = 0,
    step_ms: float = 2.0,
    server_toml: str = "",
    log_level: str = "warning",
    ready_timeout_s: float = 60.0,
) -> Iterator[str]:
    """Yields the base URL of a ready server; the server (and its workers) stop afterwards. The
    same launcher `kvgate run` uses; its log (tail shown if it never gets ready) is serve.log.
    `server_toml`: lines of a `[server]` table to add."""
    config = tmp_dir / "engine.toml"
    config.write_text(
        CONFIG_TOML.format(step_ms=step_ms, system=SYSTEM_PROMPT)
        + (f"\n[server]\n{server_toml}\n" if server_toml else "")
    )
    with ReferenceEngine(
        config,
        admin_key=ADMIN_KEY,
        workers=workers,
        log_path=tmp_dir / "serve.log",
        log_level=log_level,
        ready_timeout_s=ready_timeout_s,
    ) as target:
        yield target.url


def wait_until_drained(base: str, timeout_s: float = 20.0) -> dict:
    """The engine's snapshot once nothing runs or waits (raises if that never happens)."""

    def drained() -> dict | None:
        snap = httpx.get(f"{base}/admin/snapshot", headers=ADMIN, timeout=5).json()
        return snap if snap["num_running"] == snap["num_waiting"] == snap["num_swapped"] == 0 else None

    return wait_for(drained, "the engine drains", bound_s=timeout_s)
