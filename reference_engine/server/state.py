"""What one server process shares between its routes: the engine, its loop, its metrics, and
the identity checks (tenant keys, the admin key, the served model name).

Request ids are unique across processes and restarts (`<kind>-[w<worker>-]<nonce>-<n>`), so a
harness that merges several workers' records, or a worker's records before and after a kill,
never sees one id twice. The id is also the OpenAI `id` of the response.
"""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass, field

from reference_engine.config import EngineConfig, TenantConfig
from reference_engine.core.engine import EngineCore
from reference_engine.core.tenants import TenantState
from reference_engine.errors import AuthError, InvalidRequestError, NotFoundError
from reference_engine.server.engine_loop import EngineLoop
from reference_engine.server.metrics import EngineMetrics

_ID_PREFIX = {"chat": "chatcmpl", "text": "cmpl"}


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer KEY` header (None if absent or another scheme)."""
    if not authorization:
        return None
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return key.strip() or None


def check_admin_key(authorization: str | None, admin_key: str) -> None:
    """401 unless the header carries the admin key (compared in constant time). One engine's
    admin API and the router's both check with this."""
    if not secrets.compare_digest(bearer_key(authorization) or "", admin_key):
        raise AuthError("the admin API needs 'Authorization: Bearer <server.admin_key>' from the engine config")


def session_rebuildable(header: str | None, tenant: TenantConfig) -> bool:
    """Whether a session whose KV is gone may be re-prefilled (and flagged rebuilt) rather than
    answer 410 context_expired: the client's `X-Session-Rebuildable` (default true; 400 for a
    value other than true/false/1/0/yes/no) and the tenant's `rebuildable_sessions`, both. One
    engine applies it to an evicted session, the router to a session whose worker was lost."""
    if header is None or header.lower() in ("true", "1", "yes"):
        return tenant.rebuildable_sessions
    if header.lower() in ("false", "0", "no"):
        return False
    raise InvalidRequestError(f"X-Session-Rebuildable must be 'true' or 'false', not {header!r}",
                              param="X-Session-Rebuildable")


@dataclass(eq=False)
class ServerState:
    config: EngineConfig
    core: EngineCore
    loop: EngineLoop
    metrics: EngineMetrics
    worker: int | None = None
    started_unix: float = field(default_factory=time.time)
    _nonce: str = field(default_factory=lambda: secrets.token_hex(3))
    _ids: itertools.count = field(default_factory=itertools.count)

    @property
    def model_name(self) -> str:
        return self.config.server.served_model_name or self.config.model.name

    def new_request_id(self, kind: str) -> str:
        worker = "" if self.worker is None else f"w{self.worker}-"
        return f"{_ID_PREFIX[kind]}-{worker}{self._nonce}-{next(self._ids):x}"

    def check_model(self, model: str) -> None:
        if model not in (self.model_name, self.config.model.name):
            raise NotFoundError(f"model {model!r} is not served here; use {self.model_name!r} (GET /v1/models)",
                                param="model")

    def authenticate(self, authorization: str | None) -> TenantState:
        """Tenant and traffic class from the API key: the only source of priority."""
        return self.core.authenticate(bearer_key(authorization))

    def check_admin(self, authorization: str | None) -> None:
        check_admin_key(authorization, self.config.server.admin_key)
