"""Executor factory: `engine.executor` -> an Executor. The torch executor is optional."""

from __future__ import annotations

from collections.abc import Callable

from record.errors import ConfigError, UnknownNameError
from reference_engine.config import EngineConfig
from reference_engine.executors.base import Executor
from reference_engine.memory import MemoryPlan


def _sim(config: EngineConfig, plan: MemoryPlan) -> Executor:
    from reference_engine.executors.sim import SimExecutor

    return SimExecutor(config, plan)


def _torch(config: EngineConfig, plan: MemoryPlan) -> Executor:
    try:
        from reference_engine.executors.torch_executor import TorchExecutor
    except ImportError as err:
        raise ConfigError(
            f"engine.executor = 'torch' needs the torch extra: pip install -e '.[torch]' ({err})"
        ) from None
    return TorchExecutor(config, plan)


EXECUTORS: dict[str, Callable[[EngineConfig, MemoryPlan], Executor]] = {"sim": _sim, "torch": _torch}


def make_executor(config: EngineConfig, plan: MemoryPlan) -> Executor:
    factory = EXECUTORS.get(config.engine.executor)
    if factory is None:
        raise UnknownNameError("executor", config.engine.executor, EXECUTORS)
    return factory(config, plan)
