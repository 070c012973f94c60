"""Which tenant sends each trace request: traces have no tenants, so replay assigns them.

A spec is `KIND[:TENANTS][;OPTION=VALUE...]`, TENANTS a comma list of `name` or `name=weight`:

    round_robin[:acme,globex]            request i goes to tenant i mod n, in trace order
    fraction:acme=0.4,globex=0.3,batchco=0.3[;seed=7]
                                         each request independently, in these proportions
                                         (fractions must add up to 1)
    hash[:acme,globex][;depth=2]         by a hash of the first `depth` prefix ids, so every turn
                                         of a conversation (same leading blocks) stays with one
                                         tenant; fractions allowed as for fraction (default equal)

Without TENANTS a kind uses the config's interactive tenants (all tenants if there is none).
`hash` depth defaults to 2 because in the Mooncake trace the first block (id 0, a shared system
prompt) starts every request, so one block names no conversation; requests without prefix ids
(Azure, BurstGPT) hash their row number instead. All kinds are deterministic: the same trace,
spec and config always give the same assignment. The default spec is `hash`.

Add a kind by writing a factory `(tenants, weights, options) -> TenantAssigner` into `ASSIGNERS`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from harness.replay.trace import TraceRequest
from record.errors import KvgateError, UnknownNameError
from reference_engine.config import EngineConfig, TrafficClass
from reference_engine.core.tenants import DEFAULT_TENANT
from reference_engine.stable_id import stable_id

DEFAULT_SPEC = "hash"
_UNIT = float(1 << 63)  # stable_id is a 63-bit integer


class AssignmentSpecError(KvgateError):
    """A tenant assignment spec (`kvgate replay --tenants`) that does not parse; the message
    shows the grammar."""


class TenantAssigner(Protocol):
    def assign(self, request: TraceRequest) -> str:
        """The tenant that sends `request`."""
        ...


class RoundRobin:
    def __init__(self, tenants: Sequence[str]) -> None:
        self._next = itertools.cycle(tenants).__next__

    def assign(self, request: TraceRequest) -> str:
        return self._next()


class _Weighted:
    """Picks a tenant from a uniform number in [0, 1) by cumulative weight: O(log tenants)."""

    def __init__(self, tenants: Sequence[str], fractions: Sequence[float]) -> None:
        self._tenants = list(tenants)
        self._cumulative = list(itertools.accumulate(fractions))

    def _pick(self, key: str) -> str:
        u = stable_id(key) / _UNIT
        return self._tenants[min(bisect.bisect_right(self._cumulative, u), len(self._tenants) - 1)]


class Fraction(_Weighted):
    def __init__(self, tenants: Sequence[str], fractions: Sequence[float], seed: int) -> None:
        super().__init__(tenants, fractions)
        self._seed = seed

    def assign(self, request: TraceRequest) -> str:
        return self._pick(f"fraction:{self._seed}:{request.row}")


class PrefixHash(_Weighted):
    def __init__(self, tenants: Sequence[str], fractions: Sequence[float], depth: int) -> None:
        super().__init__(tenants, fractions)
        self._depth = depth

    def assign(self, request: TraceRequest) -> str:
        ids = request.prefix_ids[: self._depth]
        return self._pick("hash:" + (",".join(map(str, ids)) if ids else f"row{request.row}"))


def _int_option(options: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = options.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise AssignmentSpecError(f"tenant spec option {name}={raw!r} must be an integer") from None
    if value < minimum:
        raise AssignmentSpecError(f"tenant spec option {name} must be ≥ {minimum}, got {value}")
    return value


def _round_robin(tenants: list[str], weights: list[float] | None, options: Mapping[str, str]) -> TenantAssigner:
    if weights is not None:
        raise AssignmentSpecError("round_robin takes tenant names without weights")
    return RoundRobin(tenants)


def _fractions(tenants: list[str], weights: list[float] | None) -> list[float]:
    """The given fractions (which must add up to 1), or equal shares."""
    if weights is None:
        return [1 / len(tenants)] * len(tenants)
    if abs(sum(weights) - 1.0) > 1e-6:
        raise AssignmentSpecError(f"fractions must add up to 1, these add up to {sum(weights):g}")
    return weights


def _fraction(tenants: list[str], weights: list[float] | None, options: Mapping[str, str]) -> TenantAssigner:
    return Fraction(tenants, _fractions(tenants, weights), _int_option(options, "seed", 0, 0))


def _hash(tenants: list[str], weights: list[float] | None, options: Mapping[str, str]) -> TenantAssigner:
    return PrefixHash(tenants, _fractions(tenants, weights), _int_option(options, "depth", 2, 1))


AssignerFactory = Callable[[list[str], "list[float] | None", Mapping[str, str]], TenantAssigner]
ASSIGNERS: dict[str, tuple[AssignerFactory, frozenset[str]]] = {
    "round_robin": (_round_robin, frozenset()),
    "fraction": (_fraction, frozenset({"seed"})),
    "hash": (_hash, frozenset({"depth"})),
}


def default_tenants(config: EngineConfig) -> list[str]:
    """The config's interactive tenants, or all its tenants, or the open-mode `default` tenant."""
    if not config.tenants:
        return [DEFAULT_TENANT]
    interactive = [n for n, t in config.tenants.items() if t.traffic_class is TrafficClass.INTERACTIVE]
    return interactive or list(config.tenants)


def make_assigner(spec: str, config: EngineConfig) -> TenantAssigner:
    """Parse `spec` (grammar in the module docstring) against the tenants `config` defines."""
    head, *option_parts = spec.strip().split(";")
    kind, _, tenant_part = head.partition(":")
    kind = kind.strip()
    if kind not in ASSIGNERS:
        raise UnknownNameError("tenant assignment", kind, ASSIGNERS)
    factory, allowed = ASSIGNERS[kind]
    options = _parse_options(option_parts, kind, allowed)
    tenants, weights = _parse_tenants(tenant_part, config) if tenant_part.strip() else (default_tenants(config), None)
    return factory(tenants, weights, options)


def _parse_options(parts: list[str], kind: str, allowed: frozenset[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in parts)):
        name, eq, value = part.partition("=")
        if not eq or name.strip() not in allowed:
            valid = ", ".join(sorted(allowed)) or "none"
            raise AssignmentSpecError(f"unknown option {part!r} for tenant spec {kind!r} (options: {valid})")
        options[name.strip()] = value.strip()
    return options


def _parse_tenants(part: str, config: EngineConfig) -> tuple[list[str], list[float] | None]:
    valid = list(config.tenants) or [DEFAULT_TENANT]
    names: list[str] = []
    weights: list[float] = []
    for item in (x.strip() for x in part.split(",")):
        name, eq, raw = item.partition("=")
        name = name.strip()
        if not name:
            raise AssignmentSpecError(f"empty tenant name in {part!r}; expected name[=weight],...")
        if name not in valid:
            raise UnknownNameError("tenant", name, valid)
        if name in names:
            raise AssignmentSpecError(f"tenant {name!r} is listed twice in {part!r}")
        names.append(name)
        if eq:
            try:
                weights.append(float(raw))
            except ValueError:
                raise AssignmentSpecError(f"weight of tenant {name!r} must be a number, got {raw!r}") from None
            if not weights[-1] > 0:
                raise AssignmentSpecError(f"weight of tenant {name!r} must be positive, got {raw!r}")
    if weights and len(weights) != len(names):
        raise AssignmentSpecError(f"give a weight to every tenant or to none: {part!r}")
    return names, weights or None
