"""kvgate's reference inference engine: paged KV with prefix sharing, admission, watermarks,
tenant quotas, continuous batching with preemption, pluggable eviction policies.

The public face is small; everything else is importable but not promised:

    from reference_engine import EngineCore, load_config, VirtualClock
"""

from record.errors import (
    AuthError,
    CapacityError,
    ConfigError,
    ContextExpiredError,
    ContextLengthError,
    InvalidRequestError,
    KvgateError,
    RequestError,
    UnknownNameError,
    WorkerLostError,
)
from record.events import Event, EventKind
from reference_engine.clock import Clock, MonotonicClock, VirtualClock
from reference_engine.config import EngineConfig, config_digest, load_config, parse_config, with_overrides
from reference_engine.core.engine import EngineCore, StepOutput
from reference_engine.core.event_log import EventLog
from reference_engine.request import FinishReason, Request, RequestState

__all__ = [
    "AuthError",
    "CapacityError",
    "Clock",
    "ConfigError",
    "ContextExpiredError",
    "ContextLengthError",
    "EngineConfig",
    "EngineCore",
    "Event",
    "EventKind",
    "EventLog",
    "FinishReason",
    "InvalidRequestError",
    "KvgateError",
    "MonotonicClock",
    "Request",
    "RequestError",
    "RequestState",
    "StepOutput",
    "UnknownNameError",
    "VirtualClock",
    "WorkerLostError",
    "config_digest",
    "load_config",
    "parse_config",
    "with_overrides",
]
