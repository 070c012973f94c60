"""A config's secrets never leave in its redacted form, which still reads back; the digest does
not depend on keys."""

from reference_engine import config_digest, load_config, parse_config, with_overrides
from reference_engine.config import redacted, secrets_of

SECRETS = {
    "server.admin_key": "sk-admin-secret-1",
    "server.metrics_key": "sk-metrics-secret-2",
    "tenants.acme.api_keys": ["sk-acme-secret-3", "sk-acme-secret-4"],
}


def test_the_redacted_config_holds_no_secret_and_validates_again() -> None:
    config = with_overrides(load_config("configs/default.toml"), SECRETS)
    data = redacted(config)
    assert not any(secret in str(data) for secret in secrets_of(config))
    assert set(secrets_of(config)) >= {"sk-admin-secret-1", "sk-metrics-secret-2", "sk-acme-secret-3", "sk-batch"}
    assert data["tenants"]["acme"]["api_keys"] == [
        "<redacted:tenants.acme.api_keys.0>",
        "<redacted:tenants.acme.api_keys.1>",
    ]
    assert redacted(parse_config(data)) == data


def test_the_digest_names_what_runs_not_who_may_call_it() -> None:
    config = load_config("configs/default.toml")
    assert config_digest(with_overrides(config, SECRETS)) == config_digest(config)
    assert config_digest(with_overrides(config, {"kv_cache.policy": "multi_queue"})) != config_digest(config)
