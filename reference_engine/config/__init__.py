"""Validated engine configuration (TOML in, pydantic models out) and its digest."""

from reference_engine.config.engine_config import (
    ADMIN_KEY_VAR,
    DEV_ADMIN_KEY,
    EngineConfig,
    GuardConfig,
    PdFailure,
    PolicyName,
    PreemptionMode,
    PrefixSharing,
    RoutingPolicyName,
    TenantConfig,
    TierKeyScope,
    TrafficClass,
)
from reference_engine.config.loader import config_digest, load_config, parse_config, save_config, with_overrides
from reference_engine.config.redaction import redacted, secrets_of

__all__ = [
    "ADMIN_KEY_VAR",
    "DEV_ADMIN_KEY",
    "EngineConfig",
    "GuardConfig",
    "PdFailure",
    "PolicyName",
    "PreemptionMode",
    "PrefixSharing",
    "TierKeyScope",
    "RoutingPolicyName",
    "TenantConfig",
    "TrafficClass",
    "config_digest",
    "load_config",
    "parse_config",
    "redacted",
    "save_config",
    "secrets_of",
    "with_overrides",
]
