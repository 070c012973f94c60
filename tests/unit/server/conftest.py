"""The server's unit tests run their async tests on asyncio (anyio's pytest plugin)."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
