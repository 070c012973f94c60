"""The supervisor: starts N engine worker processes, watches them, restarts the ones that die.

Each worker slot owns a listening socket that the supervisor binds once (127.0.0.1, a free
port) and hands to every incarnation of that worker (`pass_fds`), so a slot keeps its port
across restarts and there is no race for a free port. With KV cache events on, a second one
per slot at the `[kv_events] endpoint` (port + worker index, or a free port) carries them, so
their subscribers (the router, a harness) stay connected to a slot across its restarts. A
slot's life:

    starting --(GET /ready answers 200)--> ready --(process exits, e.g. kill -9)--> dead
       ^                                        |                                   |
       |                                        +--(kill: hung, says the router)----+
       +---------------------- restart (backoff if it died young) -----------------+

The router learns about deaths and readiness through two callbacks; every transition is
logged with the pid, so a kill -9 in a chaos run reads plainly in the logs. A worker that is
alive but no longer answers (SIGSTOP, a deadlock) exits only when someone ends it: the router's
health probes find it and call `kill`, and its death is then reported with that cause. Workers
get PR_SET_PDEATHSIG (Linux), so they do not outlive a supervisor that is itself killed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import httpx

from reference_engine.config import EngineConfig, save_config
from reference_engine.config.engine_config import KvEventsPublisher
from reference_engine.server.kv_event_publisher import host_port, worker_endpoint

log = logging.getLogger("kvgate.supervisor")

_READY_POLL_S = 0.05
_READY_TIMEOUT_S = 120.0
_YOUNG_DEATH_S = 5.0
_MAX_BACKOFF_S = 5.0


class WorkerState(str, Enum):
    STARTING = "starting"
    READY = "ready"
    DEAD = "dead"
    STOPPED = "stopped"


@dataclass(eq=False)
class WorkerSlot:
    """One worker position. Only the supervisor writes these fields."""

    worker: int
    sock: socket.socket | None = None  # bound by Supervisor.start, kept across incarnations
    kv_events_sock: socket.socket | None = None  # the same for its KV cache events (when on)
    state: WorkerState = WorkerState.STARTING
    pid: int | None = None
    incarnation: int = 0
    restarts: int = 0
    started_unix: float = 0.0
    last_exit: str | None = None
    kill_cause: str | None = None  # why the supervisor killed this incarnation (None: it was not)
    process: asyncio.subprocess.Process | None = field(default=None, repr=False)

    @property
    def port(self) -> int | None:
        return None if self.sock is None else self.sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def kv_events_endpoint(self) -> str | None:
        """Where this slot's workers publish their KV cache events (None: they do not)."""
        if self.kv_events_sock is None:
            return None
        host, port = self.kv_events_sock.getsockname()[:2]
        return f"tcp://{host}:{port}"

    def describe(self) -> dict:
        return {
            "worker": self.worker,
            "pid": self.pid,
            "state": self.state.value,
            "port": self.port,
            "incarnation": self.incarnation,
            "restarts": self.restarts,
            "started_unix": self.started_unix,
            "last_exit": self.last_exit,
            "kv_events_endpoint": self.kv_events_endpoint,
        }


def _listening(address: tuple[str, int]) -> socket.socket:
    """A TCP socket bound to `address` and listening, to be inherited by the slot's workers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def exit_cause(returncode: int) -> str:
    """'killed by SIGKILL' / 'exit code 1' from a subprocess return code."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class Supervisor:
    def __init__(
        self,
        config: EngineConfig,
        num_workers: int,
        *,
        on_ready: Callable[[WorkerSlot], None],
        on_death: Callable[[WorkerSlot, str], None],
        log_level: str = "info",
    ) -> None:
        if num_workers < 1:
            raise ValueError("a supervisor needs at least one worker")
        self.config = config
        self.on_ready = on_ready
        self.on_death = on_death
        self.log_level = log_level
        self.slots = [WorkerSlot(i) for i in range(num_workers)]
        self._config_path: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._ready_tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    async def start(self) -> None:
        # `.json`: load_config (in the worker) reads a file by its suffix.
        with tempfile.NamedTemporaryFile("w", prefix="kvgate-config-", suffix=".json", delete=False) as f:
            self._config_path = config_path = f.name
        save_config(self.config, config_path)
        events = self.config.kv_events
        publishes = events.enable_kv_cache_events and events.publisher is KvEventsPublisher.ZMQ
        for slot in self.slots:
            slot.sock = _listening(("127.0.0.1", 0))
            if publishes:
                slot.kv_events_sock = _listening(host_port(worker_endpoint(events.endpoint, slot.worker)))
        self._tasks = [
            asyncio.create_task(self._keep_alive(slot, config_path), name=f"kvgate-worker-{slot.worker}")
            for slot in self.slots
        ]

    async def stop(self) -> None:
        self._stopping = True
        for task in (*self._tasks, *self._ready_tasks):
            task.cancel()
        for slot in self.slots:
            slot.state = WorkerState.STOPPED
            if slot.process is not None and slot.process.returncode is None:
                slot.process.terminate()
        for slot in self.slots:
            if slot.process is not None:
                try:
                    await asyncio.wait_for(slot.process.wait(), 5.0)
                except TimeoutError:
                    slot.process.kill()
                    await slot.process.wait()
            for sock in (slot.sock, slot.kv_events_sock):
                if sock is not None:
                    sock.close()
        if self._config_path is not None:
            os.unlink(self._config_path)

    async def _keep_alive(self, slot: WorkerSlot, config_path: str) -> None:
        backoff = 0.1
        while not self._stopping:
            process = await self._spawn(slot, config_path)
            returncode = await process.wait()
            if self._stopping:
                return
            cause = slot.kill_cause or exit_cause(returncode)
            lived_s = time.time() - slot.started_unix
            slot.state, slot.last_exit = WorkerState.DEAD, cause
            log.warning("worker %d (pid %s) died after %.1f s: %s", slot.worker, slot.pid, lived_s, cause)
            self.on_death(slot, cause)
            backoff = min(backoff * 2, _MAX_BACKOFF_S) if lived_s < _YOUNG_DEATH_S else 0.1
            await asyncio.sleep(backoff)
            slot.restarts += 1
            log.warning("restarting worker %d (restart %d)", slot.worker, slot.restarts)

    def kill(self, slot: WorkerSlot, cause: str) -> None:
        """End a worker that lives but does not serve (the router found it hung). SIGKILL works
        on a stopped process too; its death is then reported, and it restarts, like any other."""
        if slot.process is None or slot.process.returncode is not None or slot.kill_cause is not None:
            return
        slot.kill_cause = cause
        log.warning("worker %d (pid %s): %s; killing it", slot.worker, slot.pid, cause)
        slot.process.kill()

    async def _spawn(self, slot: WorkerSlot, config_path: str) -> asyncio.subprocess.Process:
        """Start the slot's next incarnation; returns its process (also kept in `slot.process`)."""
        assert slot.sock is not None, "start() binds every slot's socket before its first spawn"
        fds = [slot.sock.fileno()]
        args = ["--config-json", config_path, "--fd", str(fds[0]), "--worker", str(slot.worker)]
        if slot.kv_events_sock is not None:
            fds.append(slot.kv_events_sock.fileno())
            args += ["--kv-events-fd", str(fds[1])]
        slot.process = process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "reference_engine.server.worker",
            *args,
            "--log-level",
            self.log_level,
            pass_fds=fds,
        )
        slot.pid, slot.incarnation = process.pid, slot.incarnation + 1
        slot.state, slot.started_unix, slot.kill_cause = WorkerState.STARTING, time.time(), None
        log.info("worker %d started: pid %d on port %d", slot.worker, slot.pid, slot.port)
        task = asyncio.create_task(self._await_ready(slot, process, slot.incarnation))
        self._ready_tasks.add(task)
        task.add_done_callback(self._ready_tasks.discard)
        return process

    async def _await_ready(self, slot: WorkerSlot, process: asyncio.subprocess.Process, incarnation: int) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as client:
            while slot.incarnation == incarnation and slot.state is WorkerState.STARTING:
                try:
                    if (await client.get(f"{slot.url}/ready")).status_code == 200:
                        slot.state = WorkerState.READY
                        log.info(
                            "worker %d (pid %d) ready after %.2f s",
                            slot.worker,
                            slot.pid,
                            time.time() - slot.started_unix,
                        )
                        self.on_ready(slot)
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    log.error(
                        "worker %d (pid %d) not ready after %.0f s; killing it", slot.worker, slot.pid, _READY_TIMEOUT_S
                    )
                    process.kill()
                    return
                await asyncio.sleep(_READY_POLL_S)
