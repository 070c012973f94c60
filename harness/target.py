"""The target of a live run: the reference engine started for the run, or an external server.

    with ReferenceEngine(Path("configs/default.toml"), admin_key=key, workers=2,
                         log_path=run_dir / "engine.log") as target:
        ...                                 # target.url is http://127.0.0.1:<free port>

`ReferenceEngine` runs `kvgate serve` as a subprocess in its own session (a Ctrl-C in the
terminal reaches the harness, which then stops the engine in order, instead of reaching both at
once), on a free loopback port, with the admin key it is given or makes (in KVGATE_ADMIN_KEY:
never on a command line or in a file), and returns once /ready answers 200 (pinned prefixes loaded).
Leaving the block stops it: SIGINT, then SIGKILL of its process group if it does not exit;
this happens on success, on failure and on Ctrl-C alike. An external target is just a URL.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import httpx

from record.errors import KvgateError
from reference_engine.config import ADMIN_KEY_VAR

READY_POLL_S = 0.1
STOP_GRACE_S = 15.0
BACKLOG = 2048  # uvicorn's own default for the sockets it binds


class TargetError(KvgateError):
    """The target could not be started or reached."""


@dataclass(frozen=True, kw_only=True)
class Target:
    url: str
    kind: str  # reference (started for this run) | external
    metrics_url: str
    workers: int = 0
    pid: int | None = None

    def describe(self, model: str) -> dict[str, Any]:
        """meta.target."""
        return {
            "url": self.url,
            "kind": self.kind,
            "metrics_url": self.metrics_url,
            "model": model,
            "workers": self.workers,
        }


def external_target(url: str, metrics_url: str | None) -> Target:
    base = url.rstrip("/")
    return Target(url=base, kind="external", metrics_url=metrics_url if metrics_url is not None else f"{base}/metrics")


def stop_server(proc: subprocess.Popen | None, *, grace_s: float = STOP_GRACE_S, whole_group: bool = False) -> None:
    """Stop a server started in its own session: SIGINT (to its whole process group when its
    workers must hear it too), then SIGKILL to the group after `grace_s`."""
    if proc is None or proc.poll() is not None:
        return
    if whole_group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ReferenceEngine:
    """`kvgate serve --config FILE` for the length of a `with` block."""

    def __init__(
        self,
        config_path: Path,
        *,
        admin_key: str | None = None,
        workers: int = 0,
        log_path: Path | None = None,
        log_level: str = "warning",
        ready_timeout_s: float = 120.0,
        port: int = 0,
    ) -> None:
        """`admin_key`: the engine's (default: a fresh random one, in `self.admin_key`). `port`: a
        loopback port to bind (default: a free one), e.g. to start a replica again where it was."""
        self.config_path = config_path
        self.admin_key = admin_key or secrets.token_urlsafe(24)
        self.log_level = log_level
        self.workers = workers
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    def __enter__(self) -> Target:
        # The port is bound here and the socket handed over (`kvgate serve --fd`): a port only
        # looked up as free can be taken before the server binds it (the router's own workers
        # bind ephemeral ports first, and once drew the very port it was about to use).
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port freed by a killed server
            sock.bind(("127.0.0.1", self.port))
            sock.listen(BACKLOG)
            port = sock.getsockname()[1]
            cmd = [
                sys.executable,
                "-m",
                "harness.cli",
                "serve",
                "--config",
                str(self.config_path),
                "--fd",
                str(sock.fileno()),
                "--log-level",
                self.log_level,
            ]
            if self.workers:
                cmd += ["--workers", str(self.workers)]
            self._log = open(self.log_path, "wb") if self.log_path else None
            env = {**os.environ, ADMIN_KEY_VAR: self.admin_key}  # never on the command line (ps shows it)
            self.process = subprocess.Popen(
                cmd,
                stdout=self._log or subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(sock.fileno(),),
                env=env,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            self._wait_ready(url)
        except BaseException:
            self.stop()
            raise
        return Target(
            url=url, kind="reference", metrics_url=f"{url}/metrics", workers=self.workers, pid=self.process.pid
        )

    def _wait_ready(self, url: str) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.process.poll() is not None:
                raise TargetError(
                    f"kvgate serve exited with code {self.process.returncode} before it was ready{self._log_tail()}"
                )
            try:
                if httpx.get(f"{url}/ready", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TargetError(f"kvgate serve not ready after {self.ready_timeout_s:.0f} s{self._log_tail()}")
            time.sleep(READY_POLL_S)

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        lines = self.log_path.read_text(errors="replace").splitlines()[-15:]
        return f"; last lines of {self.log_path}:\n  " + "\n  ".join(lines) if lines else ""

    def stop(self) -> None:
        stop_server(self.process)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
