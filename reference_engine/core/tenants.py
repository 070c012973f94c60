"""Tenants: API key -> identity, traffic class and quota accounting.

Priority comes only from here (the tenant's configured class), never from anything a client
sends. An engine configured with no tenants runs open: every key is the `default` tenant
(interactive, default quotas); with tenants configured, an unknown key is a 401.

`TenantState` is the ledger line of one tenant. The engine's admission and scheduler are the only
writers: they charge a request's worst-case reservation when it is admitted and release it when
the request leaves, so `reserved_blocks` bounds the tenant's live blocks at every moment.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from record.errors import AuthError
from reference_engine.config import EngineConfig, TenantConfig, TrafficClass

DEFAULT_TENANT = "default"
T = TypeVar("T")


@dataclass(eq=False, slots=True)
class TenantState:
    name: str
    config: TenantConfig
    scope: int  # prefix-hash scope of this tenant's private blocks
    max_blocks: int  # hard cap: max_kv_share of the pool
    active_seqs: int = 0
    reserved_tokens: int = 0
    reserved_blocks: int = 0  # worst case of its active requests
    retained_blocks: int = 0  # held by its idle sessions
    gpu_time_s: float = 0.0
    num_requests: int = 0
    request_rate: float = 0.0  # exponentially decayed requests per second
    _rate_t_s: float = 0.0
    num_rejected: dict[str, int] = field(default_factory=dict)

    @property
    def traffic_class(self) -> TrafficClass:
        return self.config.traffic_class

    def note_request(self, now_s: float, half_life_s: float = 60.0) -> None:
        decay = 0.5 ** (max(0.0, now_s - self._rate_t_s) / half_life_s)
        self.request_rate = self.request_rate * decay + math.log(2) / half_life_s
        self._rate_t_s = now_s
        self.num_requests += 1

    def retention_pressure(self, now_s: float, half_life_s: float = 60.0) -> float:
        """Retained blocks per unit of recent traffic: high means much cache, little use."""
        rate = self.request_rate * 0.5 ** (max(0.0, now_s - self._rate_t_s) / half_life_s)
        return self.retained_blocks / (rate + 1e-3)


class TenantKeys(Generic[T]):
    """API key -> one value per tenant, with open mode: the identity check alone, shared by the
    engine (`TenantRegistry`, values `TenantState`) and the multi-worker router (which holds no
    ledger). `make(name, config)` builds each tenant's value once."""

    def __init__(self, config: EngineConfig, make: Callable[[str, TenantConfig], T]) -> None:
        tenants = dict(config.tenants)
        self.open_mode = not tenants
        if self.open_mode:
            tenants = {DEFAULT_TENANT: TenantConfig(api_keys=["*"])}
        self.by_name: dict[str, T] = {name: make(name, tc) for name, tc in tenants.items()}
        self._by_key: dict[str, T] = {key: self.by_name[name] for name, tc in tenants.items() for key in tc.api_keys}
        self._open: T | None = self.by_name[DEFAULT_TENANT] if self.open_mode else None

    def authenticate(self, api_key: str | None) -> T:
        if self._open is not None:
            return self._open
        value = self._by_key.get(api_key or "")
        if value is None:
            raise AuthError(
                "unknown API key: send 'Authorization: Bearer <key>' with a key listed under "
                "[tenants.<name>] api_keys in the engine config"
            )
        return value


class TenantRegistry:
    def __init__(self, config: EngineConfig, num_blocks: int, scope_of) -> None:
        self._keys = TenantKeys(
            config,
            lambda name, tc: TenantState(
                name=name,
                config=tc,
                scope=scope_of(name, tc.permission_version),
                max_blocks=math.floor(tc.max_kv_share * num_blocks),
            ),
        )
        self.open_mode = self._keys.open_mode
        self.tenants: dict[str, TenantState] = self._keys.by_name

    def authenticate(self, api_key: str | None) -> TenantState:
        return self._keys.authenticate(api_key)

    def __getitem__(self, name: str) -> TenantState:
        return self.tenants[name]

    def __iter__(self):
        return iter(self.tenants.values())
