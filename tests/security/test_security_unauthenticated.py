"""What a caller without any key learns: no tenant's name. As found, the unauthenticated /metrics
listed every tenant (`kvgate_tenant_kv_share{tenant="acme"}`, `kvgate_admissions_total{tenant=...}`)."""

from __future__ import annotations

import pytest

from tests.unit.server.server_support import ACME, ADMIN, chat, server_config, serving

pytestmark = pytest.mark.anyio

TENANTS = {"tenant-alpha-q7": {"api_keys": ["sk-acme"]}, "tenant-beta-q7": {"api_keys": ["sk-globex"]}}
OPEN_PATHS = ("/metrics", "/health", "/ready", "/openapi.json", "/docs", "/v1/models", "/admin/config", "/nowhere")


async def test_no_endpoint_names_a_tenant_to_a_caller_without_a_key() -> None:
    async with serving(server_config(tenants=TENANTS)) as (client, _):
        assert (await client.post("/v1/chat/completions", json=chat(), headers=ACME)).status_code == 200
        for path in OPEN_PATHS:
            text = (await client.get(path)).text
            assert "tenant-" not in text, path
        full = (await client.get("/metrics", headers=ADMIN)).text  # the admin sees every family
        assert 'kvgate_tenant_kv_share{tenant="tenant-alpha-q7"}' in full


async def test_a_metrics_key_closes_metrics_to_callers_without_it() -> None:
    async with serving(server_config(server__metrics_key="sk-scraper-key")) as (client, _):
        assert (await client.get("/metrics")).status_code == 401
        scraped = await client.get("/metrics", headers={"Authorization": "Bearer sk-scraper-key"})
        assert scraped.status_code == 200 and 'tenant="acme"' in scraped.text
