from __future__ import annotations

from pathlib import Path

import pytest

from harness.loadgen.settings import LoadSettings
from harness.profiles import PROFILES, RESOURCE_KEYS, format_overrides, get_profile
from record.errors import UnknownNameError
from reference_engine import EngineCore, VirtualClock, load_config, with_overrides

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "default.toml"


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_gives_valid_settings(name: str) -> None:
    profile = get_profile(name)
    LoadSettings(**profile.settings)
    assert profile.duration_s > 0 and profile.users >= 1 and profile.cooldown_max_s >= profile.cooldown_min_s


def test_the_profiles_run_longer_in_order_quick_ci_full() -> None:
    quick, ci, full = (get_profile(name) for name in ("quick", "ci", "full"))
    assert quick.duration_s < ci.duration_s < full.duration_s


def test_an_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="valid: ci, full, quick"):
        get_profile("fast")


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_s_engine_overrides_give_an_engine_that_starts(name: str) -> None:
    # the watermark headroom rule (one scheduler step between rungs) is checked at start
    config = with_overrides(load_config(DEFAULT_CONFIG), get_profile(name).engine_overrides)
    EngineCore(config, clock=VirtualClock())


def test_quick_and_ci_shrink_the_pool_and_never_touch_the_policy() -> None:
    for name in ("quick", "ci"):
        overrides = get_profile(name).engine_overrides
        assert overrides["hardware.kv_pool_gib"] < 52
        assert set(overrides) <= RESOURCE_KEYS
    assert format_overrides({"a.b": 1, "c.d": 2}) == "a.b = 1, c.d = 2"
