"""prefix_cache.sharing: who may hit whose cached blocks, per mode, seen as a later request's hits."""

from __future__ import annotations

import pytest

from reference_engine.config import PrefixSharing
from tests.helpers import Driver, small_config

PROMPT = list(range(500, 700))  # 12 full 16-token blocks


def hit_tokens(sharing: PrefixSharing, first: tuple[str, str | None], second: tuple[str, str | None]) -> int:
    """Prompt tokens the second request finds cached after the first (same prompt) finished."""
    d = Driver(small_config(**{"prefix_cache.sharing": sharing.value}))
    for tenant, salt in (first, second):
        r = d.add(tenant, prompt_token_ids=list(PROMPT), max_new=2, cache_salt=salt)
        d.run()
    return r.num_prefix_hit_tokens


@pytest.mark.parametrize(
    ("sharing", "other_tenant", "other_salt"),
    [
        (PrefixSharing.TENANT, 0, 0),
        (PrefixSharing.SALT, 192, 0),
        (PrefixSharing.GLOBAL, 192, 192),
    ],
)
def test_each_mode_shares_what_it_says(sharing: PrefixSharing, other_tenant: int, other_salt: int) -> None:
    assert hit_tokens(sharing, ("acme", None), ("acme", None)) == 192  # the same tenant always hits
    assert hit_tokens(sharing, ("acme", "a"), ("acme", "a")) == 192  # and the same salt
    assert hit_tokens(sharing, ("acme", None), ("globex", None)) == other_tenant
    assert hit_tokens(sharing, ("acme", "a"), ("acme", "b")) == other_salt
