from __future__ import annotations

import pytest

from harness.loadgen.settings import LoadSettings
from harness.profiles import PROFILES, get_profile
from reference_engine.errors import UnknownNameError


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_gives_valid_settings(name: str) -> None:
    profile = get_profile(name)
    LoadSettings(**profile.settings)
    assert profile.duration_s > 0 and profile.users >= 1 and profile.cooldown_max_s >= profile.cooldown_min_s


def test_quick_is_short_and_full_is_long() -> None:
    assert get_profile("quick").duration_s < 30 < get_profile("full").duration_s


def test_an_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="valid: ci, full, quick"):
        get_profile("fast")
