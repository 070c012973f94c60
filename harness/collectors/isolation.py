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
"""

from __future__ import annotations

from collections.abc import Sequence
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


def probe_isolation(base_url: str, model: str, keys: Sequence[str], metrics_url: str = "") -> Isolation:
    """Both probes, sent now."""
    distinct = list(dict.fromkeys(keys))
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
    return Isolation(
        {name: p.as_dict() for name, p in probes.items()},
        {f"{name}_probe": CollectorStatus(available=p.measurable, detail=p.detail) for name, p in probes.items()},
    )
