"""No process outlives a stopped `kvgate serve`, after traffic that starts every child it has.

A long prompt (past `LONG_PROMPT_CHARS`) is tokenized in a process of its own, forked at the
first such prompt; with `--workers` each engine worker is a process too. The prompt is the one
that showed the orphan: 32,000 words to the default config's model. The server is stopped
with SIGTERM (what CI and process managers send) or SIGINT (Ctrl-C), and every process it had
started must be gone once it has exited.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness.target import free_port
from reference_engine.server.completions import LONG_PROMPT_CHARS
from tests.processes import descendants, is_running
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "default.toml"
PROMPT_WORDS = 32_000


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_every_process_a_server_started_ends_with_it(tmp_path: Path, workers: int, stop: signal.Signals) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "harness.cli", "serve", "--config", str(CONFIG), "--port", str(port), "--dev"]
    server = subprocess.Popen([*cmd, "--workers", str(workers)], cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: ready(url), "the server is ready", alive=lambda: server.poll() is None)
        assert PROMPT_WORDS * len("alpha ") > LONG_PROMPT_CHARS
        answer = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": "llama-3.1-8b",
                "messages": [{"role": "user", "content": " ".join(["alpha"] * PROMPT_WORDS)}],
                "max_tokens": 4,
            },
            headers={"Authorization": "Bearer sk-acme"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        started = descendants(server.pid)
        assert len(started) == workers + 1  # the tokenizer process, and each worker
        server.send_signal(stop)
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    wait_for(lambda: not [p for p in started if is_running(p)], f"every process of the server ({started}) ends")
