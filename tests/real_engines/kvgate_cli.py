"""`kvgate` against the real-engine tests' `vllm serve`: one command line, the load sized for it.

kvgate("run", *against(server.url), "--profile", "quick", ..., "--out", str(run_dir))
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from tests.e2e.run_support import REPO, clean_env
from tests.real_engines.vllm_server import API_KEY, MODEL

TIMEOUT_S = 600
TENANTS = f"acme={API_KEY}:interactive,globex={API_KEY}:interactive"

# What the load keeps as written for a 270M model on two CPU cores and a 160-block pool (about
# 2,900 tokens of context); prompt and answer sizes, users' timeouts and the cancel prompt are sized
# by the run itself from the server's measured speed (harness/load_sizing.py). Long prompts stay at
# half the pool (sizing cuts to the context, not the pool), cancels land 300 ms into a prefill.
LOAD = {
    "KVGATE_CANCEL_MAX_TOKENS": "48",
    "KVGATE_CANCEL_PREFILL_MS": "300",
    "KVGATE_CANCEL_DECODE_WORDS": "4",
    "KVGATE_LONG_PROMPT_TOKENS": "1400",
    "KVGATE_BURST_SIZE": "4",
    "KVGATE_WAIT_MIN_S": "0.1",
    "KVGATE_WAIT_MAX_S": "0.5",
}


def against(url: str) -> list[str]:
    """The options that point a command at the server (or a proxy in front of it)."""
    return ["--target", url, "--model", MODEL, "--tenants", TENANTS]


def kvgate(command: str, *args: str, settings: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`settings`: KVGATE_* variables beyond LOAD (an open-loop load is not sized to the target)."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", command, *args],
        cwd=REPO,
        env={**clean_env(), **LOAD, **(settings or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
