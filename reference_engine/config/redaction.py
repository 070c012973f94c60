"""A config's secrets, and the config without them: the only form of a config that leaves the
engine process.

Secrets are `server.admin_key`, `server.metrics_key` and every tenant's `api_keys`. `/admin/config`,
a run record (`meta.json`, `engine_config.json`), reports and logs show `redacted(config)`, where
each secret is replaced by a placeholder naming where it was (`<redacted:tenants.acme.api_keys.0>`);
placeholders stay distinct, so a redacted config still validates and can be read back (a run
record's config is parsed again by the harness). `config_digest` hashes `digest_form`: two
configs that differ only in their keys run the same engine, and `kvgate run` gives every engine
it starts a fresh admin key without changing what the digest names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reference_engine.config.engine_config import EngineConfig


def _placeholder(path: str) -> str:
    return f"<redacted:{path}>"


_SERVER_SECRETS = ("admin_key", "metrics_key")


def secrets_of(config: EngineConfig) -> list[str]:
    """Every secret value the config holds."""
    server = [key for name in _SERVER_SECRETS if (key := getattr(config.server, name)) is not None]
    return server + [key for tenant in config.tenants.values() for key in tenant.api_keys]


def redacted(config: EngineConfig) -> dict[str, Any]:
    """The config as JSON-ready data with every secret replaced by its placeholder."""
    data = config.model_dump(mode="json")
    for name in _SERVER_SECRETS:
        if data["server"][name] is not None:
            data["server"][name] = _placeholder(f"server.{name}")
    for name, tenant in data["tenants"].items():
        tenant["api_keys"] = [_placeholder(f"tenants.{name}.api_keys.{i}") for i in range(len(tenant["api_keys"]))]
    return data


def digest_form(config: EngineConfig) -> dict[str, Any]:
    """What `config_digest` hashes: the config without any key. Keys say who may call the
    engine, not what it does: an engine started with a fresh admin key (or none), or with other
    tenant keys, has the digest of its config file."""
    data = config.model_dump(mode="json")
    for name in _SERVER_SECRETS:
        del data["server"][name]
    for tenant in data["tenants"].values():
        del tenant["api_keys"]
    return data


def is_secret_field(loc: Sequence[str | int]) -> bool:
    """Whether a validation error's location (`("tenants", "acme", "api_keys", 0)`) is inside a
    secret, so an error message must not show its value."""
    parts = [str(p) for p in loc]
    return (len(parts) >= 2 and parts[0] == "server" and parts[1] in _SERVER_SECRETS) or (
        len(parts) >= 3 and parts[0] == "tenants" and parts[2] == "api_keys"
    )
