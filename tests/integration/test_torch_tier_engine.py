"""The engine's tiers and the torch executor together: a prefix the pool evicted to host memory
(or, behind a small host, to disk) comes back through a real load and the answer is the one a
never-evicted prefix, and a cold recompute, give. The scheduler decides the moves (core/tiers.py),
the executor copies the bytes (executors/torch_tiers.py): if the two disagreed about what a tier
holds, the executor would refuse the block (TierBlockError) and this would fail."""

from __future__ import annotations

import pytest

from reference_engine.executors.base import Tier
from reference_engine.memory import GIB
from tests.torch_helpers import BLOCK_TOKENS, TINY_FP32_BYTES_PER_TOKEN, make_core, run_to_end, torch_config

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

BLOCK_GIB = BLOCK_TOKENS * TINY_FP32_BYTES_PER_TOKEN / GIB
HOST = {"tiers__host_gib": 64 * BLOCK_GIB}
# Behind a two-block host. kvgate-tiny re-prefills four blocks faster than an NVMe drive reads
# them: a faster disk keeps the load worth starting (the rule itself: test_tiers.py).
DISK = {"tiers__host_gib": 2 * BLOCK_GIB, "tiers__disk_gib": 64 * BLOCK_GIB, "tiers__disk_read_gbps": 1e4}
PREFIX = list(range(100, 164))  # four full blocks
FILLERS = [list(range(1_000 * i, 1_000 * i + 96)) for i in range(1, 9)]  # 56 blocks: the prefix is evicted


def answer(config_overrides: dict, *, evict: bool, corrupt: bool = False) -> tuple[list[int], object]:
    """B's tokens after A sent the prefix (and, with `evict`, fillers pushed it out of the pool;
    with `corrupt`, one bit of every block file on disk flipped behind the engine's back)."""
    core = make_core(torch_config(48, **config_overrides))
    core.add_request(tenant="acme", prompt_token_ids=list(PREFIX), max_new_tokens=4)
    run_to_end(core)
    for filler in FILLERS if evict else []:
        core.add_request(tenant="globex", prompt_token_ids=filler, max_new_tokens=4)
        run_to_end(core)
    for path in sorted(core.executor.tiers.disk_dir.iterdir()) if corrupt else []:
        raw = bytearray(path.read_bytes())
        raw[-7] ^= 0x01
        path.write_bytes(raw)
    b = core.add_request(tenant="acme", prompt_token_ids=[*PREFIX, *range(7, 27)], max_new_tokens=6)
    run_to_end(core)
    return list(b.output_token_ids), core


@pytest.mark.parametrize(
    ("tiers", "source"),
    [(HOST, Tier.HOST), (DISK, Tier.DISK)],
    ids=["host", "disk"],
)
def test_a_prefix_loaded_back_from_a_tier_answers_as_one_never_evicted(tiers: dict, source: Tier) -> None:
    kept, _ = answer({}, evict=False)
    cold, _ = answer({"prefix_cache__enabled": False}, evict=False)
    loaded, core = answer(tiers, evict=True)
    counters = core.tiers.counters[source]
    assert counters.promoted >= len(PREFIX) // BLOCK_TOKENS - (source is Tier.DISK), counters
    assert counters.failed == 0 and counters.slower == 0
    assert loaded == kept == cold


def test_a_block_corrupt_on_disk_is_never_served_the_load_recomputes() -> None:
    kept, _ = answer({}, evict=False)
    loaded, core = answer(DISK, evict=True, corrupt=True)
    disk = core.tiers.counters[Tier.DISK]
    assert disk.failed >= 1 and disk.corrupt_served == 0, disk
    assert loaded == kept  # recomputed from the tokens, as if never cached


def test_closing_the_engine_removes_the_disk_tier_directory() -> None:
    """The directory goes when the engine is closed (server shutdown, replay end), not at exit."""
    _, core = answer(DISK, evict=True)
    disk_dir = core.executor.tiers.disk_dir
    assert disk_dir is not None and any(disk_dir.iterdir())
    core.close()
    assert not disk_dir.exists()
    core.close()  # idempotent
