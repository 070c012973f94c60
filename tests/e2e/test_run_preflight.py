"""`kvgate run` against a target that fails the preflight exits 2 and says plainly what is wrong,
before any load (no run record is written, and no --out directory is left behind)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.target import free_port
from tests.e2e.run_support import kvgate_run
from tests.integration.server_process import running_server
from tests.stub_http import stub_server

pytestmark = pytest.mark.slow

NOT_FOUND = b'{"detail": "Not Found"}'


def no_choices(method: str, path: str) -> tuple[int, bytes]:
    """Answers a POST with JSON that is no completion: 200 without `choices`."""
    return (200, b'{"status": "queued", "ticket": 17}') if method == "POST" else (404, NOT_FOUND)


@pytest.fixture
def no_choices_url() -> Iterator[str]:
    with stub_server(no_choices) as url:
        yield url


def fails_preflight(tmp_path: Path, *args: str) -> str:
    run_dir = tmp_path / "run"
    result = kvgate_run(*args, "--profile", "quick", "--out", str(run_dir), timeout_s=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert not run_dir.exists()  # nothing was recorded, so nothing is left behind
    return " ".join(result.stderr.split())


def test_refused_points_at_the_address(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert f"cannot connect to {url}" in fails_preflight(tmp_path, "--target", url)


def test_401_404_and_a_wrong_base_url_against_the_reference_engine(tmp_path: Path) -> None:
    with running_server(tmp_path) as base:
        assert "refused the API key sk-wr…ey (HTTP 401" in fails_preflight(
            tmp_path, "--target", base, "--tenants", "me=sk-wrong-key"
        )
        message = fails_preflight(tmp_path, "--target", base, "--tenants", "acme=sk-acme", "--model", "gpt-4")
        assert "the model 'gpt-4' is not served here; the server lists these models: kvgate-tiny" in message
        assert "it ends in /v1: give the server root" in fails_preflight(
            tmp_path, "--target", base + "/v1", "--tenants", "acme=sk-acme", "--model", "kvgate-tiny"
        )


def test_a_body_without_choices_is_printed(tmp_path: Path, no_choices_url: str) -> None:
    message = fails_preflight(tmp_path, "--target", no_choices_url, "--model", "m")
    assert "no `choices`" in message and '"ticket": 17' in message
