"""Real-engine tests run only when asked for: `pytest -m real_engine tests/real_engines`.

They start `vllm serve` on CPU (minutes to load, minutes of load on two cores), so the plain
suite skips them with that command as the reason; when selected they still skip, saying what to
install, where vLLM or the model is missing (tests/real_engines/setup_vllm_cpu.sh builds both).
"""

from __future__ import annotations

import pytest

MARK = "real_engine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if MARK in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason=f"real-engine tests run only when selected: pytest -m {MARK} tests/real_engines")
    for item in items:
        if MARK in item.keywords:
            item.add_marker(skip)
