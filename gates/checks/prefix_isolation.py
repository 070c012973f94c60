"""prefix_isolation: no tenant, and no cache_salt, hits another's cached prompt.

A prefix-cache hit is visible to the client (its time to first token, and `cached_tokens` in
the usage), so an engine that lets one tenant hit another's blocks tells it which prompts the
other sent: a timing side channel on other tenants' data. Before the load the harness probes it
(harness/collectors/isolation.py): a prompt unique to the run sent by tenant A, again by A (must
hit, or nothing can be told), then by tenant B (`cross_tenant`); and the same with one key and
cache_salts A, A, B (`cache_salt`). Every token B hits is a leak. A probe whose same-party
repeat did not hit (prefix caching off, or hits reported nowhere) is not measurable, never a
pass. vLLM shares every unsalted block between all callers: behind a gateway that sends each
tenant's cache_salt it passes, without one it fails the cross-tenant probe.

With `--probes tiers` both probes run again per KV tier, the prompt pushed out of the GPU into
the tier before each repeat (harness/collectors/tier_probe.py): `cross_tenant_host`,
`cache_salt_disk`, ... An offload store whose key drops the tenant or the salt fails there
while the GPU pool passes. Each metric is the most any probe of its party hit.
"""

from __future__ import annotations

from typing import Any

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.run_record import RunRecord

PROBES = {"cross_tenant": "max_other_tenant_hit_tokens", "cache_salt": "max_other_salt_hit_tokens"}
"""The probe in the GPU pool of each party, and its metric; `<probe>_<tier>` are the same below it."""


def _metric(kind: str) -> str | None:
    """The metric a probe of meta.probes is judged by (None: not an isolation probe)."""
    return next((metric for probe, metric in PROBES.items() if kind == probe or kind.startswith(f"{probe}_")), None)


class PrefixIsolationGate:
    name = "prefix_isolation"
    sources = (Source.PROBES,)
    title = "Prefix cache isolated between tenants and salts"
    metrics = {
        "max_other_tenant_hit_tokens": "prompt tokens tenant B hit of a prompt only tenant A sent",
        "max_other_salt_hit_tokens": "prompt tokens one cache_salt hit of a prompt sent under another",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        probes: dict[str, dict[str, Any]] = record.meta.probes
        evidence = {kind: p for kind, p in probes.items() if _metric(kind)}
        measured = {kind: p for kind, p in evidence.items() if p.get("measurable")}
        if not measured:
            why = "; ".join(f"{kind}: {p['detail']}" for kind, p in evidence.items())
            return GateResult.not_measurable(
                self.name, f"no isolation probe could tell ({why or 'none ran before the load'})", evidence
            )
        most: dict[str, int] = {}
        for kind, p in measured.items():
            metric = _metric(kind)
            assert metric is not None
            most[metric] = max(most.get(metric, 0), int(p["other_hit_tokens"]))
        measurements = [
            Measurement(metric, most[metric], limits[metric], Unit.COUNT)
            for metric in PROBES.values()
            if metric in most
        ]
        explanation = "; ".join(
            f"{kind.replace('_', ' ')}: {p['detail']}" + ("" if kind in measured else " (not measured)")
            for kind, p in evidence.items()
        )
        return GateResult.judged(self.name, measurements, explanation, evidence)
