"""probe_isolation: both probes against a stub engine, with one tenant key and with two."""

from __future__ import annotations

import json

from harness.collectors.isolation import ONE_KEY, probe_isolation
from tests.stub_http import stub_server


def tenant_scoped(method: str, path: str, seen: list[tuple[str, str, dict[str, str]]]) -> tuple[int, bytes]:
    """Hits 256 tokens when the key before this request sent the same prompt (the probes send
    each prompt as prime, same party, other party: a tenant-scoped, salted cache)."""
    if path != "/v1/chat/completions":
        return 404, b"{}"
    n = len(seen)  # this request is seen[n - 1]; the probes' requests come in threes
    hit = 256 if (n - 1) % 3 == 1 else 0
    body = {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens_details": {"cached_tokens": hit}}}
    return 200, json.dumps(body).encode()


def test_two_keys_probe_both_and_one_key_cannot_probe_across_tenants() -> None:
    seen: list[tuple[str, str, dict[str, str]]] = []
    with stub_server(lambda m, p: tenant_scoped(m, p, seen), seen) as url:
        two, one = probe_isolation(url, "m", ["sk-a", "sk-a", "sk-b"]), probe_isolation(url, "m", ["sk-a", "sk-a"])
    probes, statuses, one_probes, one_statuses = two.probes, two.statuses, one.probes, one.statuses
    assert probes["cache_salt"]["isolated"] is True and probes["cross_tenant"]["isolated"] is True
    assert statuses["cache_salt_probe"].available and statuses["cross_tenant_probe"].available
    keys = [h["Authorization"] for _, _, h in seen[:6]]
    assert keys == ["Bearer sk-a"] * 3 + ["Bearer sk-a", "Bearer sk-a", "Bearer sk-b"]
    assert one_probes["cache_salt"]["measurable"] and not one_probes["cross_tenant"]["measurable"]
    assert one_statuses["cross_tenant_probe"].detail == ONE_KEY
