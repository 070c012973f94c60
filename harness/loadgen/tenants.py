"""Tenants as the load generator sees them: a name, an API key and the traffic class the
server gives that key.

The class is *not* sent to the server (priority comes only from the key, server-side); the
harness keeps it to label its own rows and to pick which tenant a scenario speaks for. A spec
string carries them through command lines and environment variables:

    acme=sk-acme:interactive,batchco=sk-batch:batch,ops=sk-ops:system
    mykey=sk-123                      (class omitted: interactive)
    me=a:b:interactive                (a key holding ':' names its class)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reference_engine.config import EngineConfig, TrafficClass

TRAFFIC_CLASSES = tuple(c.value for c in TrafficClass)

DEFAULT_SPEC = (
    "acme=sk-acme:interactive,globex=sk-globex:interactive,initech=sk-initech:interactive,"
    "umbrella=sk-umbrella:interactive,hooli=sk-hooli:interactive,stark=sk-stark:interactive,"
    "wayne=sk-wayne:interactive,wonka=sk-wonka:interactive,tyrell=sk-tyrell:interactive,"
    "cyberdyne=sk-cyberdyne:interactive,soylent=sk-soylent:interactive,oscorp=sk-oscorp:interactive,"
    "batchco=sk-batch:batch,nightly=sk-nightly:batch,ops=sk-ops:system"
)
"""The tenants of configs/default.toml."""


class TenantSpecError(ValueError):
    """A tenant spec that cannot be read; the message shows the expected form."""


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    key: str
    traffic_class: str = "interactive"


def parse_tenants(spec: str) -> tuple[Tenant, ...]:
    """`name=key[:class],...` -> tenants, in spec order."""
    tenants: list[Tenant] = []
    for number, item in enumerate((part.strip() for part in spec.split(",")), 1):
        if not item:
            continue
        name, sep, rest = item.partition("=")
        if not sep or not name.strip() or not rest.strip():  # the entry is not shown: it may be a key
            raise TenantSpecError(f"tenant entry {number} is not name=key[:class] (e.g. acme=sk-acme:interactive)")
        key, traffic_class = rest, "interactive"
        head, colon, tail = rest.rpartition(":")
        if colon:  # a key with a ':' in it gives its class too: me=a:b:interactive
            if tail not in TRAFFIC_CLASSES:
                raise TenantSpecError(
                    f"tenant {name.strip()!r}: what follows the last ':' is not a traffic class "
                    f"({', '.join(TRAFFIC_CLASSES)}); a key that holds ':' needs its class after it"
                )
            key, traffic_class = head, tail
        tenants.append(Tenant(name.strip(), key.strip(), traffic_class))
    if not tenants:
        raise TenantSpecError("no tenants: expected name=key[:class],...")
    return tuple(tenants)


def format_tenants(tenants: Iterable[Tenant]) -> str:
    return ",".join(f"{t.name}={t.key}:{t.traffic_class}" for t in tenants)


def tenants_of_config(config: EngineConfig) -> tuple[Tenant, ...]:
    """One tenant per configured tenant, with its first key (what `kvgate run` hands the scenarios)."""
    return tuple(Tenant(name, t.api_keys[0], t.traffic_class.value) for name, t in config.tenants.items())


class TenantSet:
    """The tenants a run may speak for, picked by traffic class.

    A target without a tenant of the wanted class (one key for a vLLM server) degrades to any
    tenant: the scenario still runs, and its rows carry the class that tenant really has."""

    def __init__(self, tenants: Sequence[Tenant]) -> None:
        if not tenants:
            raise TenantSpecError("at least one tenant is needed")
        self.all = tuple(tenants)
        self._next: dict[str, int] = {}

    def of_class(self, traffic_class: str) -> tuple[Tenant, ...]:
        return tuple(t for t in self.all if t.traffic_class == traffic_class) or self.all

    def pick(self, traffic_class: str, index: int) -> Tenant:
        """Round-robin over the tenants of a class: user `index` speaks for this one."""
        candidates = self.of_class(traffic_class)
        return candidates[index % len(candidates)]

    def next_of_class(self, traffic_class: str) -> Tenant:
        """Round-robin over the tenants of a class across every caller: the tenant of the next
        user, whatever its scenario. Counting per scenario instead would put the first user of
        every scenario on the same tenant (a mixed run of one user per scenario: all the
        interactive load on one tenant and its cap), which is not the load a server sees."""
        index = self._next.get(traffic_class, 0)
        self._next[traffic_class] = index + 1
        return self.pick(traffic_class, index)

    def named(self, name: str) -> Tenant:
        for t in self.all:
            if t.name == name:
                return t
        raise TenantSpecError(f"unknown tenant {name!r}; known: {', '.join(t.name for t in self.all)}")
