"""Fixtures shared by all tests; helpers live in tests/helpers.py."""

from __future__ import annotations

import pytest

from tests.helpers import Driver, small_config


@pytest.fixture
def driver() -> Driver:
    return Driver(small_config())


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (anyio's pytest plugin) run on asyncio, the server's loop."""
    return "asyncio"
