"""Secrets never leave the engine process: not through /admin/config, not into a run record, its
report or its logs; and no engine starts on a key everybody knows.

As found: /admin/config returned the admin key and every tenant key, `meta.json` and
`report.html` embedded them (the artefacts CI uploads), and a config without `[server]
admin_key` silently served the public default `sk-kvgate-admin`.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from reference_engine import load_config
from reference_engine.config import ADMIN_KEY_VAR, secrets_of
from tests.e2e.run_support import DEFAULT_CONFIG, REPO, clean_env, load_record
from tests.unit.server.server_support import ADMIN, server_config, serving


@pytest.mark.anyio
async def test_admin_config_shows_no_key() -> None:
    config = server_config(server__metrics_key="sk-metrics-secret")
    async with serving(config) as (client, _):
        answer = (await client.get("/admin/config", headers=ADMIN)).text
    assert secrets_of(config) and not any(key in answer for key in secrets_of(config))


def test_serve_refuses_to_start_without_an_admin_key_of_its_own() -> None:
    for extra_env in ({}, {ADMIN_KEY_VAR: "sk-kvgate-admin"}):  # none at all; the public dev key
        result = subprocess.run(
            [sys.executable, "-m", "harness.cli", "serve", "--config", str(DEFAULT_CONFIG), "--port", "0"],
            cwd=REPO,
            env={**clean_env(), **extra_env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2 and result.stdout == "", result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith("kvgate: ") and "--dev" in line


@pytest.mark.slow
def test_no_configured_key_appears_anywhere_under_a_run_directory(tmp_path: Path) -> None:
    text = DEFAULT_CONFIG.read_text()
    for key in secrets_of(load_config(DEFAULT_CONFIG)):  # every tenant key, made unmistakable
        text = text.replace(f'"{key}"', f'"{key}-{secrets.token_hex(8)}"')
    config = tmp_path / "secret.toml"
    config.write_text(text.replace("[server]\n", f'[server]\nmetrics_key = "sk-metrics-{secrets.token_hex(8)}"\n'))
    admin_key = f"sk-admin-{secrets.token_hex(8)}"
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--policy",
            str(config),
            "--workers",
            "2",
            "--profile",
            "quick",
            "--scenarios",
            "short_qa",
            "--duration",
            "3",
            "--out",
            str(run_dir),
        ],
        cwd=REPO,
        env={**clean_env(), ADMIN_KEY_VAR: admin_key},
        capture_output=True,
        text=True,
        timeout=180,
    )
    load_record(result, run_dir)
    keys = [admin_key, *secrets_of(load_config(config))]
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"meta.json", "report.html", "engine.log", "locust.log", "engine_config.json"} <= {p.name for p in files}
    for path in files:
        content = path.read_bytes()
        assert not [key for key in keys if key.encode() in content], path
    assert not [key for key in keys if key in result.stdout + result.stderr]
    assert "<redacted:tenants.acme.api_keys.0>" in (run_dir / "meta.json").read_text()  # the config is there, redacted
