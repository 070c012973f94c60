"""Prefix-cache isolation, probed before the load: can one party hit another's cached prompt?

    isolation = probe_isolation(base_url, model, keys, metrics_url)

Two probes (prefix_cache.py sends them): `cache_salt` (one key, salts A, A, B) and
`cross_tenant` (tenant A twice, then tenant B, no salt). A hit tells the second party that the
first sent that prompt: a timing side channel on another tenant's prompts, which is what salts
and tenant-scoped hashing exist to close. Each probe is measurable only when the same party's
repeat hit; the `prefix_isolation` gate judges them.

They run before the run's clock starts, so the engine events of the probe requests are not the
run's (the event collector drops what came before), and before the cold-start reset of a target
that has one, which also clears the probe's blocks. A run may instead repeat an earlier run's
result (`Isolation.note` says whose): a sweep probes once, before its first step.

Two more kinds, asked for with `ProbeOptions` (`kvgate run --probes tiers,timing`), since each
costs seconds to a minute: `tiers` repeats both probes with the prompt pushed out of the GPU
into each tier below it first (tier_probe.py: `cache_salt_host`, `cross_tenant_disk`, ...);
`timing` times cold and warm prompts of the same and of another party (timing_probe.py:
`timing_cross_tenant`, `timing_cache_salt`), for the `prefix_timing` gate.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from harness.collectors.prefix_cache import (
    IsolationProbe,
    prefix_client,
    probe_cache_salt,
    probe_cross_tenant,
    scraped_hit_counter,
)
from harness.collectors.prometheus import PrometheusScraper
from harness.collectors.tier_probe import offload_routes, probe_tiers
from harness.collectors.timing_probe import BUDGET_S, Party, probe_timing, size_timing
from harness.loadgen.prompts import REFERENCE_TOKENS, TokenModel
from harness.loadgen.tenants import Tenant
from harness.target_speed import SpeedNotMeasuredError, TargetTooSlowError, measure_speed
from record.run_record import CollectorStatus

ONE_KEY = "one tenant key in this run: give two tenants with their own keys (--tenants) to probe this"


@dataclass(frozen=True)
class Isolation:
    """Both probes' results (meta.probes) and statuses (meta.collectors)."""

    probes: dict[str, dict[str, Any]]
    statuses: dict[str, CollectorStatus]
    note: str = ""
    """Empty where the run itself probed; else the note a run that repeats this result records
    (which run probed, and on what), so the record never claims a probe it did not send."""


TIMING_KINDS = ("cross_tenant", "cache_salt")
EXTRA_PROBES = ("tiers", "timing")
"""The probes `kvgate run --probes` may add."""


@dataclass(frozen=True)
class ProbeOptions:
    """The probes beyond the two in the GPU pool, and what they need."""

    tiers: bool = False
    timing: tuple[str, ...] = ()
    """The pairs the timing probe times (of `TIMING_KINDS`); () sends none."""
    admin_key: str = ""
    """The reference engine's admin key: its offload hook for the tier probes."""
    tokens: TokenModel = REFERENCE_TOKENS
    timing_budget_s: float = BUDGET_S

    @classmethod
    def named(cls, names: Iterable[str]) -> ProbeOptions:
        """The options for `--probes` names (of `EXTRA_PROBES`)."""
        chosen = set(names)
        return cls(tiers="tiers" in chosen, timing=TIMING_KINDS if "timing" in chosen else ())


def probe_isolation(
    base_url: str, model: str, keys: Sequence[str], metrics_url: str = "", options: ProbeOptions = ProbeOptions()
) -> Isolation:
    """Both probes, and those `options` ask for, sent now."""
    distinct = list(dict.fromkeys(keys))
    statuses: dict[str, CollectorStatus] = {}
    with ExitStack() as stack:
        scraper = PrometheusScraper(metrics_url, api_key=distinct[0]) if metrics_url else None
        if scraper is not None:
            stack.callback(scraper.close)
        counter = scraped_hit_counter(scraper) if scraper is not None else None
        clients = [stack.enter_context(prefix_client(key)) for key in distinct[:2]]
        probes = {"cache_salt": probe_cache_salt(clients[0], base_url, model, counter)}
        probes["cross_tenant"] = (
            probe_cross_tenant(clients[0], clients[1], base_url, model, counter)
            if len(clients) > 1
            else IsolationProbe(False, None, None, "", ONE_KEY)
        )
        if options.tiers:
            routes, why = offload_routes(clients[0], base_url, options.admin_key)
            probes |= probe_tiers(clients, base_url, model, routes, counter)
            if not routes:
                statuses["tier_probes"] = CollectorStatus(available=False, detail=why)
    found: dict[str, dict[str, Any]] = {name: p.as_dict() for name, p in probes.items()}
    statuses |= {
        f"{name}_probe": CollectorStatus(available=p.measurable, detail=p.detail) for name, p in probes.items()
    }
    if options.timing:
        timed = _timing(base_url, model, distinct, options)
        found |= timed
        statuses |= {
            f"{name}_probe": CollectorStatus(available=bool(p["sent"]), detail=str(p["detail"]))
            for name, p in timed.items()
        }
    return Isolation(found, statuses)


def _timing(base_url: str, model: str, keys: Sequence[str], options: ProbeOptions) -> dict[str, dict[str, Any]]:
    """The timing probe's pairs, sized to the target's speed measured now."""
    a = Tenant(name="probe-a", key=keys[0])
    b = Tenant(name="probe-b", key=keys[1]) if len(keys) > 1 else None
    run = secrets.token_hex(4)
    pairs = {"cache_salt": (Party(a, f"kvgate-timing-a-{run}"), Party(a, f"kvgate-timing-b-{run}"))}
    if b is not None:
        pairs["cross_tenant"] = (Party(a), Party(b))
    pairs = {kind: pairs[kind] for kind in options.timing if kind in pairs}
    unsent = {f"timing_{kind}": {"sent": False, "detail": ONE_KEY} for kind in options.timing if kind not in pairs}
    try:
        speed = measure_speed(base_url, key=a.key, model=model, tokens=options.tokens)
    except (SpeedNotMeasuredError, TargetTooSlowError) as err:
        return unsent | {f"timing_{kind}": {"sent": False, "detail": f"the target's speed: {err}"} for kind in pairs}
    plan = size_timing(speed, len(pairs), options.timing_budget_s)
    return unsent | probe_timing(base_url, model, pairs, plan, options.tokens)
