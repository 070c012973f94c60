"""The binding check: a config is tuned for one model, runtime and GPU.

Watermarks and block estimates calibrated on one (model digest, runtime version, GPU SKU) give
false headroom on another. A config that names what it was bound to refuses to start elsewhere.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from record.errors import ConfigError
from reference_engine.config.engine_config import EngineConfig


def runtime_version() -> str:
    try:
        return version("kvgate")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def check_binding(config: EngineConfig, model_digest: str) -> None:
    b = config.binding
    actual = {"gpu_sku": config.hardware.gpu, "runtime_version": runtime_version(), "model_digest": model_digest}
    wrong = [
        f"binding.{k} = {getattr(b, k)!r} but this engine has {v!r}"
        for k, v in actual.items()
        if getattr(b, k) and getattr(b, k) != v
    ]
    if wrong:
        raise ConfigError(
            "this config was calibrated for another setup: "
            + "; ".join(wrong)
            + ". Recalibrate the thresholds for this setup, then update [binding]."
        )
