"""Worker kill: `kill -9` of one reference-engine worker process, found through /admin/workers.

Guarded so it can only hit what it means to: the target must be on a loopback address (the pid
is local), the engine must run at least two workers (a single engine is the whole server), and
the pid must be a live `reference_engine.server.worker` process. Anything else is a refusal
with a reason, and the scenario stops instead of guessing.
"""

from __future__ import annotations

import ipaddress
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

WORKER_MODULE = b"reference_engine.server.worker"


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    worker: int
    pid: int | None
    state: str


class KillRefused(Exception):
    """Why no worker may be killed now; `permanent` when it never will be on this target."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent


def parse_workers(body: dict[str, Any]) -> list[WorkerInfo]:
    """The `/admin/workers` answer as a list (single-process engines list themselves, worker null)."""
    return [
        WorkerInfo(
            worker=-1 if w.get("worker") is None else int(w["worker"]), pid=w.get("pid"), state=str(w.get("state", ""))
        )
        for w in body.get("workers", [])
    ]


def is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_engine_worker(pid: int, proc: Path = Path("/proc")) -> bool:
    try:
        return WORKER_MODULE in (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False


def choose_victim(base_url: str, workers: list[WorkerInfo], turn: int) -> WorkerInfo:
    """The worker to kill on this turn (rotating over the ready ones), or KillRefused."""
    if not is_loopback(base_url):
        raise KillRefused(
            f"target {base_url} is not on a loopback address: its worker pids are not ours to kill", permanent=True
        )
    if len(workers) < 2 or any(w.worker < 0 for w in workers):
        raise KillRefused("the engine does not run several workers (kvgate serve --workers N, N >= 2)", permanent=True)
    ready = [w for w in workers if w.state == "ready" and w.pid and is_engine_worker(w.pid)]
    if len(ready) < 2:
        raise KillRefused(
            "fewer than two ready workers right now: killing one would take the service down", permanent=False
        )
    return ready[turn % len(ready)]


def kill_worker(victim: WorkerInfo) -> None:
    """SIGKILL, like an OOM killer or a crashed GPU process: no chance to clean up."""
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
