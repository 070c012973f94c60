"""meta.json of a live run: the same `RunMeta` replay writes, with mode "live".

What ran comes from the engine itself when it has an admin API (`/admin/config`: the validated
config and its digest), else from the `--policy` file of an engine the run started, else it is
unknown (an external target: policy "external", no pool, no tenants, no watermarks). On an
external target the user may name the `--policy` file as a label (`--label-policy`): then the
policy and digest are the file's, and the pool, watermarks and tenant caps stay unknown, so no
gate judges a vLLM run against kvgate's own ladder. Live-only facts (profile, users,
locust's exit code, whether the engine drained) go under the extra key `live`. No secret is
recorded: the config is redacted (reference_engine/config/redaction.py) and settings leave out
the tenants' keys and the admin key.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from record.run_record import Phase, PoolInfo, RunMeta, Signals, TenantInfo
from reference_engine import EngineConfig, config_digest, parse_config
from reference_engine.config import redacted
from reference_engine.memory import MemoryPlan


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def watermarks_of(config: EngineConfig) -> dict[str, float]:
    g = config.kv_cache.guard
    return {
        "warn": g.warn_at_percent / 100,
        "admission": g.admission_at_percent / 100,
        "evict": g.evict_at_percent / 100,
        "pause_batch": g.pause_batch_prefill_at_percent / 100,
        "preempt": g.preempt_at_percent / 100,
        "reject": g.reject_at_percent / 100,
        "interactive_reserve": g.interactive_reserve_percent / 100,
    }


def engine_config_of(
    admin_answer: dict[str, Any] | None, local: EngineConfig | None
) -> tuple[EngineConfig | None, str]:
    """(config, digest): what the engine says it runs, else the local file's."""
    if admin_answer is not None:
        return parse_config(admin_answer["config"]), str(admin_answer["digest"])
    return (local, config_digest(local)) if local is not None else (None, "")


def live_meta(
    *,
    run_id: str,
    started_unix: float,
    duration_s: float,
    config: EngineConfig | None,
    digest: str,
    config_path: str,
    scenarios: list[str],
    target: dict[str, Any],
    num_blocks: int | None,
    phases: list[Phase],
    signals: Signals,
    initial: dict[str, Any],
    final: dict[str, Any],
    notes: list[str],
    gpu_name: str,
    live: dict[str, Any],
    config_is_label: bool = False,
) -> RunMeta:
    """`config_is_label`: the config only names what ran (module docstring)."""
    pool = tenants = None
    if config is not None and not config_is_label:
        plan = MemoryPlan.from_config(config)
        pool = PoolInfo(
            num_blocks=num_blocks or plan.num_blocks,
            block_tokens=plan.block_tokens,
            bytes_per_block=plan.bytes_per_block,
            model=plan.model.name,
            gpu=plan.gpu.name,
        )
        tenants = {
            name: TenantInfo(traffic_class=t.traffic_class.value, max_kv_share=t.max_kv_share)
            for name, t in config.tenants.items()
        }
    return RunMeta(
        run_id=run_id,
        mode="live",
        started_unix=started_unix,
        duration_s=duration_s,
        policy=config.kv_cache.policy.value if config is not None else "external",
        config_path=config_path,
        config_digest=digest,
        config=redacted(config) if config is not None else {},
        scenarios=scenarios,
        target=target,
        pool=pool,
        watermarks=watermarks_of(config) if config is not None and not config_is_label else {},
        tenants=tenants or {},
        phases=phases,
        signals=signals,
        versions={
            "kvgate": package_version("kvgate"),
            "python": platform.python_version(),
            "locust": package_version("locust"),
        },
        hardware={
            "cpu": platform.machine(),
            "num_cpus": os.cpu_count(),
            "platform": sys.platform,
            "gpu": gpu_name or "none (NVML unavailable)",
            "engine_gpu": f"simulated {config.hardware.gpu}"
            if config is not None and not config_is_label and config.engine.executor == "sim"
            else "",
        },
        initial=initial,
        final=final,
        notes=notes,
        live=live,
    )
