"""salt_isolation: a prompt sent with another `cache_salt` never hits the cache a salt filled.

Tenants that share a server keep their prefixes apart with `cache_salt` (vLLM, the reference
engine): a shared block would let one tenant time another's prompts. The probe
(harness/collectors/prefix_cache.py) sends one prompt three times before the load, with nothing
else in flight: salt A, A again, salt B. The repeat with A must hit — else the probe cannot
tell isolation from no caching, and the gate is not measurable, never passed — and B must hit
nothing.

The probe runs against targets without kvgate's admin API; the reference engine's salted
scopes are covered by its own tests (reference_engine/core/prefix_hash.py), so its runs carry
no probe and the gate says so.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from harness.run_record import RunRecord


class SaltIsolationGate:
    name = "salt_isolation"
    title = "cache_salt isolates prefixes"
    metrics = {"max_cross_salt_hit_tokens": "cached tokens a prompt hit under another salt than the one that filled it"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        probe = record.meta.probes.get("cache_salt")
        if probe is None:
            return GateResult.not_measurable(self.name, "no cache_salt probe in the record (it runs against "
                                                        "targets without kvgate's admin API)")
        if not probe.get("measurable"):
            return GateResult.not_measurable(self.name, f"cache_salt probe not measurable: {probe.get('detail')}",
                                             probe)
        measurement = Measurement("max_cross_salt_hit_tokens", probe["other_salt_hit_tokens"],
                                  limits["max_cross_salt_hit_tokens"], Unit.COUNT)
        explanation = (f"the same salt hit {probe['same_salt_hit_tokens']} cached tokens, another salt "
                       f"{probe['other_salt_hit_tokens']} (from {probe['source']})")
        return GateResult.judged(self.name, [measurement], explanation, probe)
