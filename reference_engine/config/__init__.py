"""Validated engine configuration (TOML in, pydantic models out) and its digest."""

from reference_engine.config.engine_config import (
    EngineConfig,
    GuardConfig,
    PolicyName,
    PreemptionMode,
    TenantConfig,
    TrafficClass,
)
from reference_engine.config.loader import config_digest, load_config, parse_config, save_config, with_overrides

__all__ = ["EngineConfig", "GuardConfig", "PolicyName", "PreemptionMode", "TenantConfig", "TrafficClass",
           "config_digest", "load_config", "parse_config", "save_config", "with_overrides"]
