import pytest

from reference_engine import ConfigError, EngineConfig, config_digest, load_config, parse_config, with_overrides
from reference_engine.config import save_config


def test_default_config_file_loads_and_is_stable(tmp_path):
    cfg = load_config("configs/default.toml")
    assert cfg.kv_cache.policy.value == "lru" and cfg.kv_cache.guard.preempt_at_percent == 92
    assert config_digest(cfg) == config_digest(load_config("configs/default.toml"))


def test_digest_ignores_spelling_but_not_meaning():
    a = parse_config({"kv_cache": {"policy": "lru"}})
    b = parse_config({})  # lru is the default: same meaning, same digest
    c = parse_config({"kv_cache": {"policy": "multi_queue"}})
    assert config_digest(a) == config_digest(b) != config_digest(c)


def test_invalid_value_names_key_value_and_range(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[kv_cache.guard]\nwarn_at_percent = 150\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    msg = str(err.value)
    assert "kv_cache.guard.warn_at_percent" in msg and "150" in msg and "100" in msg


def test_unknown_key_is_an_error_not_a_default():
    with pytest.raises(ConfigError, match="kv_cache.polcy: unknown key"):
        parse_config({"kv_cache": {"polcy": "lru"}})


def test_watermarks_must_increase():
    with pytest.raises(ConfigError, match="watermarks must increase"):
        parse_config({"kv_cache": {"guard": {"evict_at_percent": 95}}})


def test_unknown_model_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="llama-3.1-8b"):
        parse_config({"model": {"name": "gpt-5"}})


def test_api_keys_are_unique_across_tenants_and_the_message_never_shows_one():
    with pytest.raises(ConfigError, match="an api key of tenant 'b' is also an api key of tenant 'a'") as err:
        parse_config({"tenants": {"a": {"api_keys": ["sk-shared"]}, "b": {"api_keys": ["sk-shared"]}}})
    assert "sk-shared" not in str(err.value)


def test_not_a_file_and_not_toml(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "x.toml").write_text("[oops")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "x.toml")


def test_a_saved_config_loads_back_to_the_same_digest(tmp_path):
    # what `kvgate run` writes beside a run whose profile changed the engine (engine_config.json)
    cfg = with_overrides(load_config("configs/default.toml"), {"hardware.kv_pool_gib": 7})
    loaded = load_config(save_config(cfg, tmp_path / "engine_config.json"))
    assert loaded == cfg and config_digest(loaded) == config_digest(cfg)
    (tmp_path / "bad.json").write_text("[1, 2")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="table of tables"):
        load_config(tmp_path / "list.json")


def test_overrides_revalidate():
    cfg = with_overrides(EngineConfig(), {"engine.block_tokens": 32})
    assert cfg.engine.block_tokens == 32
    with pytest.raises(ConfigError):
        with_overrides(cfg, {"engine.block_tokens": 0})


def test_watermarks_closer_than_one_step_are_refused():
    from reference_engine import EngineCore, VirtualClock

    cfg = with_overrides(EngineConfig(), {"hardware.kv_pool_gib": 0.25})  # 128 blocks, default budgets
    with pytest.raises(ConfigError, match="closer than one scheduler step"):
        EngineCore(cfg, clock=VirtualClock())


def test_binding_refuses_a_config_tuned_for_another_gpu_or_model():
    from reference_engine import EngineCore, VirtualClock
    from reference_engine.memory import MemoryPlan

    with pytest.raises(ConfigError, match="binding.gpu_sku = 'h200' but this engine has 'h100-sxm'"):
        EngineCore(with_overrides(EngineConfig(), {"binding.gpu_sku": "h200"}), clock=VirtualClock())
    with pytest.raises(ConfigError, match="binding.model_digest"):
        EngineCore(with_overrides(EngineConfig(), {"binding.model_digest": "0123456789ab"}), clock=VirtualClock())
    digest = MemoryPlan.from_config(EngineConfig()).model_digest
    EngineCore(
        with_overrides(EngineConfig(), {"binding.model_digest": digest, "binding.gpu_sku": "h100-sxm"}),
        clock=VirtualClock(),
    )
    fp8 = MemoryPlan.from_config(with_overrides(EngineConfig(), {"model.kv_dtype": "fp8"})).model_digest
    assert fp8 != digest


def test_config_reference_page_is_up_to_date():
    from pathlib import Path

    from reference_engine.config.doc import render

    assert Path("docs/config.md").read_text() == render(), (
        "docs/config.md is stale: python -m reference_engine.config.doc > docs/config.md"
    )


def test_a_config_extends_another_and_changes_only_what_it_names(tmp_path):
    (tmp_path / "base.toml").write_text(
        '[kv_cache]\npolicy = "lru"\nmax_session_idle_seconds = 60\n'
        '[tenants.a]\napi_keys = ["ka"]\nmax_kv_share = 0.15\n'
        '[[prefix_cache.public_prefixes]]\nname = "p"\ntext = "hello there"\n'
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "child.toml").write_text(
        'extends = "../base.toml"\n[kv_cache]\npolicy = "multi_queue"\n[tenants.a]\nmax_kv_share = 0.02\n'
        '[tenants.b]\napi_keys = ["kb"]\n'
    )
    cfg = load_config(tmp_path / "sub" / "child.toml")
    assert cfg.kv_cache.policy.value == "multi_queue" and cfg.kv_cache.max_session_idle_seconds == 60
    assert cfg.tenants["a"].api_keys == ["ka"] and cfg.tenants["a"].max_kv_share == 0.02
    assert set(cfg.tenants) == {"a", "b"}
    assert [p.name for p in cfg.prefix_cache.public_prefixes] == ["p"]  # arrays of tables are inherited whole
    spelled_out = load_config(tmp_path / "base.toml").model_dump(mode="json")
    spelled_out["kv_cache"]["policy"] = "multi_queue"
    spelled_out["tenants"]["a"]["max_kv_share"] = 0.02
    spelled_out["tenants"]["b"] = {"api_keys": ["kb"]}
    assert config_digest(cfg) == config_digest(parse_config(spelled_out))  # the digest is of the meaning


@pytest.mark.parametrize(
    ("files", "match"),
    [
        ({"a.toml": 'extends = "b.toml"', "b.toml": 'extends = "a.toml"'}, "cycle"),
        ({"a.toml": 'extends = "missing.toml"'}, "no such config file.*extended by"),
        ({"a.toml": "extends = 3"}, "path of another config file"),
    ],
)
def test_extends_refuses_a_cycle_a_missing_parent_and_a_non_path(tmp_path, files, match):
    for name, text in files.items():
        (tmp_path / name).write_text(text + "\n")
    with pytest.raises(ConfigError, match=match):
        load_config(tmp_path / "a.toml")


def test_batch_jobs_wait_out_a_peak_longer_than_a_chat_user_waits():
    from reference_engine.config import TrafficClass

    admission = EngineConfig().admission
    assert admission.queue_deadline_for(TrafficClass.BATCH) == 30_000
    assert (
        admission.queue_deadline_for(TrafficClass.INTERACTIVE)
        == 8_000
        == admission.queue_deadline_for(TrafficClass.SYSTEM)
    )
    same = parse_config({"admission": {"batch_queue_deadline_ms": None}}).admission
    assert same.queue_deadline_for(TrafficClass.BATCH) == 8_000
