"""The isolation probes against a real `vllm serve` on CPU that accepts any key, as behind a
gateway that authenticates tenants and forwards to it: vLLM keeps cache_salts apart, and shares
every unsalted block between all callers, so tenant B hits a prompt only tenant A sent. That is
what the `prefix_isolation` gate fails on unless the gateway salts each tenant. The tier probes
reset the GPU prefix cache before each repeat: with no offloading connector nothing keeps the
prompt, and they are not measurable.

    pytest -m real_engine tests/real_engines/test_vllm_isolation.py -s     # a few minutes
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.collectors.isolation import ProbeOptions, probe_isolation
from tests.real_engines.conftest import ENV_DIR, MODEL_DIR
from tests.real_engines.vllm_server import MODEL, REAL_ENGINE_TIMEOUT_S, VllmServer, missing

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(REAL_ENGINE_TIMEOUT_S)]


def test_vllm_keeps_salts_apart_and_shares_prompts_across_tenants(tmp_path: Path) -> None:
    if why := missing(ENV_DIR, MODEL_DIR):
        pytest.skip(why)
    with VllmServer(ENV_DIR, MODEL_DIR, tmp_path / "vllm.log", api_key=None) as server:
        keys = ["sk-tenant-a", "sk-tenant-b"]
        probes = probe_isolation(server.url, MODEL, keys, f"{server.url}/metrics", ProbeOptions(tiers=True)).probes
    print(probes)
    salt, tenant = probes["cache_salt"], probes["cross_tenant"]
    assert salt["measurable"] and salt["isolated"] is True and salt["same_hit_tokens"] > 0
    assert tenant["measurable"] and tenant["isolated"] is False
    assert tenant["other_hit_tokens"] == tenant["same_hit_tokens"]  # B hits all that A's repeat did
    # /reset_prefix_cache pushes the prompt below the GPU; without an offloading connector
    # nothing keeps it there, and the tier probes say they cannot tell
    for kind in ("cache_salt_below_gpu", "cross_tenant_below_gpu"):
        assert not probes[kind]["measurable"] and "no tier below the GPU kept" in probes[kind]["detail"]
