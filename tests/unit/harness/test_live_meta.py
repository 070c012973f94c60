from __future__ import annotations

from harness.live_meta import engine_config_of, live_meta
from harness.loadgen.settings import LoadSettings
from record.run_record import Phase, RunMeta, Signals
from reference_engine import config_digest, load_config

CONFIG = load_config("configs/default.toml")


def meta(**changes) -> RunMeta:
    fields = {
        "run_id": "r",
        "started_unix": 1.0,
        "duration_s": 30.0,
        "config": CONFIG,
        "digest": config_digest(CONFIG),
        "config_path": "configs/default.toml",
        "scenarios": ["short_qa"],
        "target": {"url": "u", "kind": "reference"},
        "num_blocks": None,
        "phases": [Phase(name="load", start_s=1, end_s=2)],
        "signals": Signals(),
        "initial": {},
        "final": {},
        "notes": [],
        "gpu_name": "",
        "live": {},
    }
    return live_meta(**{**fields, **changes})


def test_a_reference_run_names_what_ran() -> None:
    m = meta()
    assert (m.mode, m.policy, m.config_digest) == ("live", "lru", config_digest(CONFIG))
    assert m.pool is not None and m.pool.num_blocks == 26995 and m.pool.model == "llama-3.1-8b"
    assert m.tenants["batchco"].traffic_class == "batch" and m.tenants["acme"].max_kv_share == 0.15
    assert m.watermarks["evict"] == 0.85 and m.watermarks["interactive_reserve"] == 0.25
    assert m.versions["locust"] != "unknown" and m.hardware["engine_gpu"] == "simulated h100-sxm"
    assert meta(num_blocks=53990).pool.num_blocks == 53990  # two workers: the pools the engine reported


def test_an_external_target_without_a_config_is_external_with_no_pool() -> None:
    m = meta(config=None, digest="")
    assert (m.policy, m.pool, m.tenants, m.watermarks, m.config) == ("external", None, {}, {}, {})


def test_a_policy_label_on_an_external_target_names_it_and_assumes_none_of_its_numbers() -> None:
    m = meta(config_is_label=True, target={"url": "u", "kind": "external"})
    assert (m.policy, m.config_digest) == ("lru", config_digest(CONFIG))
    assert (m.pool, m.tenants, m.watermarks, m.hardware["engine_gpu"]) == (None, {}, {}, "")


def test_the_engines_own_config_wins_over_the_local_file() -> None:
    other = load_config("configs/default.toml").model_copy()
    answer = {"config": CONFIG.model_dump(mode="json"), "digest": "from-engine"}
    assert engine_config_of(answer, other) == (CONFIG, "from-engine")
    assert engine_config_of(None, CONFIG) == (CONFIG, config_digest(CONFIG))
    assert engine_config_of(None, None) == (None, "")


def test_recorded_settings_carry_no_keys() -> None:
    out = LoadSettings(tenants="acme=sk-secret:interactive").public()
    assert out["tenants"] == ["acme"] and "admin_key" not in out and "sk-secret" not in str(out)
