"""Real-engine tests run only when asked for: `pytest -m real_engine tests/real_engines`.

They start `vllm serve` on CPU (minutes to load, minutes of load on two cores), so the plain
suite skips them with that command as the reason; when selected they still skip, saying what to
install, where vLLM or the model is missing (tests/real_engines/setup_vllm_cpu.sh builds both).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_engines.vllm_server import VllmServer, missing

MARK = "real_engine"
ENV_DIR = Path(os.environ.get("KVGATE_VLLM_ENV", "/work/vllm-env"))
MODEL_DIR = Path(os.environ.get("KVGATE_VLLM_MODEL", "/work/models/gemma-3-270m"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if MARK in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason=f"real-engine tests run only when selected: pytest -m {MARK} tests/real_engines")
    for item in items:
        if MARK in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """One `vllm serve` for every module that asks (loading takes minutes), with its API key."""
    if why := missing(ENV_DIR, MODEL_DIR):
        pytest.skip(why)
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    with VllmServer(ENV_DIR, MODEL_DIR, log) as server:
        yield server


@pytest.fixture(scope="session")
def values(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """What each run measured, by test: printed and written when the session ends."""
    found: dict = {}
    yield found
    path = tmp_path_factory.getbasetemp() / "real_engine_values.json"
    path.write_text(json.dumps(found, indent=2, default=str))
    print(f"\nreal-engine values ({path}):\n{json.dumps(found, indent=2, default=str)}")
