"""Fuzz the server from its own OpenAPI schema (schemathesis, in-process): valid and invalid
inputs alike get a 4xx or a 2xx, never a 5xx; afterwards the engine still serves and holds no
request blocks."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi

from reference_engine import EngineConfig, with_overrides
from reference_engine.server import create_app

TENANT_KEY, ADMIN_KEY = "sk-acme", "sk-kvgate-admin"

# A tiny model with a 48-token context per request, so any generated request finishes in a few
# sub-millisecond steps.
CONFIG = with_overrides(
    EngineConfig(),
    {
        "model.name": "kvgate-tiny",
        "hardware.kv_pool_gib": 0.25,
        "sim.step_overhead_ms": 0.2,
        "admission.max_new_tokens_default": 8,
        "server.admin_key": ADMIN_KEY,
        "tenants": {"acme": {"api_keys": [TENANT_KEY], "max_context_tokens": 48}},
    },
)
app = create_app(CONFIG)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


def auth_for(path: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_KEY if path.startswith('/admin') else TENANT_KEY}"}


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_input_makes_a_server_error(case):
    if isinstance(case.body, dict) and isinstance(case.body.get("model"), str):
        case.body["model"] = "kvgate-tiny"  # past the 404 for unknown models, into the engine
    response = case.call(headers=auth_for(case.path))
    case.validate_response(response, checks=[not_a_server_error])


def test_after_fuzzing_the_engine_serves_and_holds_no_request_blocks():
    with asgi.get_client(app) as client:
        ok = client.post(
            "/v1/completions", json={"model": "kvgate-tiny", "prompt": "a b", "max_tokens": 2}, headers=auth_for("/v1")
        )
        assert ok.status_code == 200
        snapshot = client.get("/admin/snapshot", headers=auth_for("/admin")).json()
    assert snapshot["num_running"] == snapshot["num_waiting"] == 0
    assert snapshot["active_blocks"] == 0 and snapshot["num_open_streams"] == 0
