"""The registry: every policy registered once, resolved by name; every config file loads and runs."""

from pathlib import Path

import pytest

from reference_engine import EngineCore, UnknownNameError, VirtualClock, load_config
from reference_engine.config import PolicyName
from reference_engine.memory import MemoryPlan
from reference_engine.policies import registry
from tests.helpers import small_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
APPROXIMATE = {"streamingllm", "h2o", "zones"}
BASELINES = {"none", "vllm_like"}  # kept apart: compared against, never gated as candidates


def config_path(name: str) -> Path:
    return CONFIGS / "baselines" / f"{name}.toml" if name in BASELINES else CONFIGS / f"{name}.toml"


def test_every_policy_name_has_exactly_one_factory():
    assert set(registry.POLICIES) == {p.value for p in PolicyName}


@pytest.mark.parametrize("name", [p.value for p in PolicyName])
def test_each_name_resolves_to_its_policy(name):
    config = small_config(overrides={"kv_cache.policy": name})
    policy = registry.make_policy(config, MemoryPlan.from_config(config))
    assert policy.name == name and policy.approximate == (name in APPROXIMATE)


def test_an_unregistered_name_is_an_error_that_lists_the_valid_ones(monkeypatch):
    monkeypatch.delitem(registry.POLICIES, "h2o")
    config = small_config(overrides={"kv_cache.policy": "h2o"})
    with pytest.raises(UnknownNameError, match="unknown policy 'h2o'; valid: lru, multi_queue, none"):
        registry.make_policy(config, MemoryPlan.from_config(config))


@pytest.mark.parametrize("name", [p.value for p in PolicyName])
def test_each_policy_has_a_config_file_that_loads_and_serves(name):
    config = load_config(config_path(name))
    assert config.kv_cache.policy.value == name
    core = EngineCore(config, clock=VirtualClock())
    core.pin_prefixes()
    r = core.add_request(tenant="acme", prompt_token_ids=list(range(5_000, 5_300)), max_new_tokens=8)
    while core.has_work():
        core.clock.advance_to(core.step().t_end_s)
    assert r.num_output_tokens == 8 and core.policy.name == name


def test_config_files_differ_from_the_default_only_in_their_policy():
    """A policy's config may also tune its own section ([streamingllm], [h2o]), nothing else."""
    default = load_config(CONFIGS / "default.toml").model_dump()
    for name in [p.value for p in PolicyName]:
        config = load_config(config_path(name)).model_dump()
        assert config["kv_cache"] == {**default["kv_cache"], "policy": PolicyName(name)}
        if name in BASELINES:  # the baselines also leave long-prefill chunking off, as vLLM does
            assert config["engine"]["long_prefill_token_threshold"] == 0
            config["engine"]["long_prefill_token_threshold"] = default["engine"]["long_prefill_token_threshold"]
        own = {"kv_cache", name}
        assert {k: v for k, v in config.items() if k not in own} == {
            k: v for k, v in default.items() if k not in own
        }, name
