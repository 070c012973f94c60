"""Typed errors of the reference engine, one hierarchy for the core, the server and the CLI.

    KvgateError                     base: a message that says what to fix
    ├── ConfigError                 a config file or value is invalid (key, value, allowed range)
    ├── UnknownNameError            a name not in a registry (policy, model, gpu, executor, gate);
    │                               the message lists the valid names
    ├── DeviceOutOfMemoryError      an executor's device allocation failed mid-step (CUDA OOM);
    │                               the engine fails that step's requests with an `oom` event
    ├── TierBlockError              a KV tier below the device cannot give back a block as asked:
    │                               missing, corrupt, or another block; never served, so the
    │                               engine can recompute it
    ├── StartupError                the server will not start: no admin key (and no --dev), the
    │                               public dev key outside a dev run, or its address is taken
    └── RequestError                a request the engine refuses; carries an HTTP status and an
        │                           OpenAI error `code`, so the server maps it without guessing
        ├── InvalidRequestError     400 malformed input
        ├── ContextLengthError      400 context_length_exceeded
        ├── AuthError               401 unknown API key
        ├── NotFoundError           404 unknown model or route
        ├── RequestTimeoutError     408 request_timeout (the body did not arrive in time)
        ├── ContextExpiredError     410 context_expired (session state gone, not rebuildable)
        ├── PayloadTooLargeError    413 request_too_large (body over server.max_body_bytes)
        ├── CapacityError           429 kv_capacity / tenant_quota / queue_deadline (+ retry_after_s)
        ├── OutOfMemoryError        503 out_of_memory (an allocation failed with nothing to preempt)
        ├── OverloadedError         503 too_many_connections (server.max_connections)
        └── WorkerLostError         503 worker_lost

`assert` is used only for internal invariants; anything a user can cause raises one of these.
"""

from __future__ import annotations

from collections.abc import Iterable


class KvgateError(Exception):
    """Base of every error kvgate raises on purpose."""


class ConfigError(KvgateError):
    """An invalid configuration: the message names the key, the value and what is allowed."""


class UnknownNameError(KvgateError, KeyError):
    """A name that is not registered; the message lists the names that are."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]

    def __reduce__(self):  # rebuilt from its fields in another process (a replay worker)
        return type(self), (self.kind, self.name, self.valid)


class DeviceOutOfMemoryError(KvgateError):
    """The device ran out of memory while executing a step: an admission or sizing bug made real.

    Raised by an executor (torch: from `torch.cuda.OutOfMemoryError`); `EngineCore` turns it
    into an `oom` event and fails the requests of that step, as a real engine's OOM would."""


class TierBlockError(KvgateError):
    """A host or disk KV tier cannot give back (or forget) the block stored under `key`: it holds
    none, its file is unreadable or fails its checksum, or it holds another block (key, shape or
    dtype differ). Raised by an executor before any byte of it reaches the device: a wrong block
    is never served, and the engine may fall back to recomputing the tokens."""

    def __init__(self, message: str, *, tier: str, key: int) -> None:
        super().__init__(message)
        self.tier, self.key = tier, key


class StartupError(KvgateError):
    """The server refuses to start; the message says what to give it."""


class RequestError(KvgateError):
    """A request the engine refuses. `status` and `code` follow the OpenAI error shape."""

    status: int = 400
    code: str = "invalid_request"
    error_type: str = "invalid_request_error"

    def __init__(
        self, message: str, *, code: str | None = None, param: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.param = param
        self.retry_after_s = retry_after_s

    def to_openai(self) -> dict:
        """The body OpenAI-compatible clients expect: {"error": {message, type, param, code}}."""
        return {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}


class InvalidRequestError(RequestError):
    status, code = 400, "invalid_request"


class ContextLengthError(RequestError):
    status, code = 400, "context_length_exceeded"


class AuthError(RequestError):
    status, code, error_type = 401, "invalid_api_key", "authentication_error"


class NotFoundError(RequestError):
    status, code, error_type = 404, "model_not_found", "not_found_error"


class RequestTimeoutError(RequestError):
    status, code = 408, "request_timeout"


class ContextExpiredError(RequestError):
    status, code = 410, "context_expired"


class PayloadTooLargeError(RequestError):
    status, code = 413, "request_too_large"


class CapacityError(RequestError):
    """429: `code` is one of kv_capacity, tenant_quota, queue_deadline; `limit` names the tenant
    limit behind a tenant_quota (admission's `TenantLimit`: kv_share, active_seqs, reserved_tokens)."""

    status, code, error_type = 429, "kv_capacity", "rate_limit_error"

    def __init__(
        self, message: str, *, code: str | None = None, retry_after_s: float | None = None, limit: str | None = None
    ) -> None:
        super().__init__(message, code=code, retry_after_s=retry_after_s)
        self.limit = limit


class OutOfMemoryError(RequestError):
    status, code, error_type = 503, "out_of_memory", "server_error"


class OverloadedError(RequestError):
    status, code, error_type = 503, "too_many_connections", "server_error"


class WorkerLostError(RequestError):
    status, code, error_type = 503, "worker_lost", "server_error"
