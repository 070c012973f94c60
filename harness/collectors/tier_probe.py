"""Isolation after offload: is a prompt still scoped once it left the GPU for a tier below?

    routes, why = offload_routes(client, base_url, admin_key)
    probes = probe_tiers(clients, base_url, model, routes, hit_counter)

The `cache_salt` and `cross_tenant` probes (prefix_cache.py) run with the prompt in the GPU
pool. Offload stores below it (host DRAM, disk, a remote cache) key blocks their own way, and
an offload path that drops the salt or the tenant from its key serves one party's prefix to
another once it was evicted there, while the GPU pool stays scoped. So each probe runs again
with the prompt pushed down before each repeat: prime as A, push down, repeat as A (must hit:
the tier kept it), push down again (A's repeat brought it back up), send as B (must miss).

How a prompt is pushed down, in the order tried:
- the reference engine's `POST /admin/tiers/offload` (admin key), once per tier it reports in
  `/admin/snapshot`: `host`, then `disk` (through the host);
- `POST /reset_prefix_cache` (vLLM with VLLM_SERVER_DEV_MODE=1, SGLang's /flush_cache): the GPU
  prefix cache is emptied, and what an offloading connector stored below it stays (`below_gpu`).
  Without such a connector nothing keeps the prompt, and the probe says so: not measurable.
A target with neither gets no tier probe, and the record says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from harness.collectors.prefix_cache import (
    HitCounter,
    IsolationProbe,
    Offload,
    ProbeFailed,
    probe_cache_salt,
    probe_cross_tenant,
    reset_prefix_cache,
)
from harness.collectors.prometheus import bearer

SNAPSHOT_PATH = "/admin/snapshot"
OFFLOAD_PATH = "/admin/tiers/offload"
BELOW_GPU = "below_gpu"
"""The tier of a target whose reset empties only the GPU pool: whatever offload store it has."""


@dataclass(frozen=True)
class OffloadRoute:
    """One tier a prompt can be pushed down to, and how."""

    tier: str
    offload: Offload


def offload_routes(client: httpx.Client, base_url: str, admin_key: str = "") -> tuple[list[OffloadRoute], str]:
    """The tiers this target's prompts can be pushed to; none, and why, when it has no way."""
    base = base_url.rstrip("/")
    if admin_key:
        tiers = _engine_tiers(client, base, admin_key)
        if tiers is not None:
            if not tiers:
                return [], "the engine has no KV tier below the GPU ([tiers] host_gib or disk_gib makes one)"
            return [OffloadRoute(t, _admin_offload(client, base, admin_key, t)) for t in tiers], ""
    reset = reset_prefix_cache(client, base)
    if not reset.available:
        return [], f"no way to push a prompt out of the GPU: no admin offload, {reset.detail}"
    return [OffloadRoute(BELOW_GPU, _reset_offload(client, base))], ""


def _engine_tiers(client: httpx.Client, base: str, admin_key: str) -> list[str] | None:
    """The KV tiers the reference engine reports, host first; None: not the reference engine."""
    try:
        resp = client.get(base + SNAPSHOT_PATH, headers=bearer(admin_key))
        body = resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    tiers = body.get("tiers") or {}
    return [t for t in ("host", "disk") if t in tiers]


def _admin_offload(client: httpx.Client, base: str, admin_key: str, tier: str) -> Offload:
    def offload() -> None:
        try:
            resp = client.post(base + OFFLOAD_PATH, json={"tier": tier}, headers=bearer(admin_key))
        except httpx.HTTPError as err:
            raise ProbeFailed(f"offload to {tier}: {type(err).__name__}") from err
        if resp.status_code != 200:
            raise ProbeFailed(f"offload to {tier}: HTTP {resp.status_code} {resp.text[:200]}")

    return offload


def _reset_offload(client: httpx.Client, base: str) -> Offload:
    def offload() -> None:
        reset = reset_prefix_cache(client, base)
        if not reset.ok:
            raise ProbeFailed(f"reset before the repeat: {reset.detail}")

    return offload


def probe_tiers(
    clients: Sequence[httpx.Client],
    base_url: str,
    model: str,
    routes: Sequence[OffloadRoute],
    hit_counter: HitCounter | None = None,
) -> dict[str, IsolationProbe]:
    """Both probes per tier, named `<probe>_<tier>` (`cache_salt_host`, `cross_tenant_disk`);
    the cross-tenant one only with two clients (two tenants' keys)."""
    out: dict[str, IsolationProbe] = {}
    for route in routes:
        out[f"cache_salt_{route.tier}"] = probe_cache_salt(clients[0], base_url, model, hit_counter, route.offload)
        if len(clients) > 1:
            out[f"cross_tenant_{route.tier}"] = probe_cross_tenant(
                clients[0], clients[1], base_url, model, hit_counter, route.offload
            )
    return out
