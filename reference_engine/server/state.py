"""What one server process shares between its routes: the engine, its loop, its metrics, and
the identity checks (tenant keys, the admin key, the served model name).

Request ids are unique across processes and restarts (`<kind>-[w<worker>-]<nonce>-<n>`), so a
harness that merges several workers' records, or a worker's records before and after a kill,
never sees one id twice. The id is also the OpenAI `id` of the response. Only the server makes
ids: a client's `X-Request-Id` is a label (completions.py), and the one caller that may name a
request is a router that proves it holds the admin key (`forwarded_request_id`).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from dataclasses import dataclass, field

from starlette.datastructures import Headers

from record.errors import AuthError, InvalidRequestError, NotFoundError
from reference_engine.config import EngineConfig, TenantConfig
from reference_engine.config.engine_config import ServerConfig
from reference_engine.core.engine import EngineCore
from reference_engine.core.tenants import TenantState
from reference_engine.server.engine_loop import EngineLoop
from reference_engine.server.metrics import EngineMetrics
from reference_engine.server.openai_format import TokenPieces
from reference_engine.server.pd_loop import PdLoop
from reference_engine.server.tokenize_pool import TokenizePool

_ID_PREFIX = {"chat": "chatcmpl", "text": "cmpl"}


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer KEY` header (None if absent or another scheme)."""
    if not authorization:
        return None
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return key.strip() or None


FORWARDED_ID_HEADER = "x-kvgate-request-id"
ROUTER_KEY_HEADER = "x-kvgate-router-key"


def is_key(key: str | None, expected: str | None) -> bool:
    """Whether `key` is the `expected` secret (constant time); nothing matches an unset one."""
    return expected is not None and secrets.compare_digest((key or "").encode(), expected.encode())


def check_admin_key(authorization: str | None, admin_key: str | None) -> None:
    """401 unless the header carries the admin key. One engine's admin API and the router's
    both check with this."""
    if not is_key(bearer_key(authorization), admin_key):
        raise AuthError(
            "the admin API needs 'Authorization: Bearer <admin key>': the key `kvgate serve` was "
            "started with ([server] admin_key or KVGATE_ADMIN_KEY)"
        )


def metrics_with_tenants(authorization: str | None, server: ServerConfig) -> bool:
    """Whether a /metrics caller sees the per-tenant families: with the admin key or
    `server.metrics_key`. Without either it sees the rest, unless a metrics key is configured:
    then /metrics is closed (401)."""
    key = bearer_key(authorization)
    if is_key(key, server.admin_key) or is_key(key, server.metrics_key):
        return True
    if server.metrics_key is not None:
        raise AuthError("/metrics needs 'Authorization: Bearer <server.metrics_key>'")
    return False


def session_rebuildable(header: str | None, tenant: TenantConfig) -> bool:
    """Whether a session whose KV is gone may be re-prefilled (and flagged rebuilt) rather than
    answer 410 context_expired: the client's `X-Session-Rebuildable` (default true; 400 for a
    value other than true/false/1/0/yes/no) and the tenant's `rebuildable_sessions`, both. One
    engine applies it to an evicted session, the router to a session whose worker was lost."""
    if header is None or header.lower() in ("true", "1", "yes"):
        return tenant.rebuildable_sessions
    if header.lower() in ("false", "0", "no"):
        return False
    raise InvalidRequestError(
        f"X-Session-Rebuildable must be 'true' or 'false', not {header!r}", param="X-Session-Rebuildable"
    )


@dataclass(eq=False)
class ServerState:
    config: EngineConfig
    core: EngineCore
    loop: EngineLoop | PdLoop  # one engine's, or a served P/D pair's (pd_loop.py)
    metrics: EngineMetrics
    worker: int | None = None
    started_unix: float = field(default_factory=time.time)
    _nonce: str = field(default_factory=lambda: secrets.token_hex(3))
    _ids: itertools.count = field(default_factory=itertools.count)
    pieces: TokenPieces = field(init=False)  # every stream's per-token JSON, shared
    tokenize_pool: TokenizePool = field(init=False)  # long prompts: tokenized off the event loop
    _intake_locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pieces = TokenPieces(self.core.tokenizer)
        self.tokenize_pool = TokenizePool(self.core.tokenizer)

    def intake_lock(self, tenant: str) -> asyncio.Lock:
        """The lock a tenant's long prompts take, one at a time, from their count check to their
        submission (completions.py)."""
        lock = self._intake_locks.get(tenant)
        if lock is None:
            lock = self._intake_locks[tenant] = asyncio.Lock()
        return lock

    @property
    def model_name(self) -> str:
        return self.config.server.served_model_name or self.config.model.name

    def new_request_id(self, kind: str) -> str:
        worker = "" if self.worker is None else f"w{self.worker}-"
        return f"{_ID_PREFIX[kind]}-{worker}{self._nonce}-{next(self._ids):x}"

    def check_model(self, model: str) -> None:
        if model not in (self.model_name, self.config.model.name):
            raise NotFoundError(
                f"model {model!r} is not served here; use {self.model_name!r} (GET /v1/models)", param="model"
            )

    def authenticate(self, authorization: str | None) -> TenantState:
        """Tenant and traffic class from the API key: the only source of priority."""
        return self.core.authenticate(bearer_key(authorization))

    def check_admin(self, authorization: str | None) -> None:
        check_admin_key(authorization, self.config.server.admin_key)

    def forwarded_request_id(self, headers: Headers) -> str | None:
        """The id a router named this request with (`X-Kvgate-Request-Id`), or None. It is taken
        only with the admin key beside it (`X-Kvgate-Router-Key`): a client that sends the header
        without it is refused (401), so no client can name, and so occupy, an engine request id."""
        request_id = headers.get(FORWARDED_ID_HEADER)
        if request_id is None:
            return None
        if not is_key(headers.get(ROUTER_KEY_HEADER), self.config.server.admin_key):
            raise AuthError(
                "X-Kvgate-Request-Id is for the kvgate router (with its X-Kvgate-Router-Key); "
                "a client's own id goes in X-Request-Id"
            )
        return request_id
