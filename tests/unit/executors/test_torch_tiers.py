"""The tier store moves blocks by key between the device pool, host memory and disk, exactly,
forgets them when told, and leaves no file behind."""

from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")

from record.errors import TierBlockError  # noqa: E402
from reference_engine.executors.base import Tier, TierDrop, TierTransfer  # noqa: E402
from reference_engine.executors.torch_kv import PagedKVCache  # noqa: E402
from reference_engine.executors.torch_tiers import TierStore  # noqa: E402
from tests.torch_helpers import DEVICE  # noqa: E402

pytestmark = pytest.mark.torch
BT = 4


def new_cache(dtype=torch.float32, num_blocks: int = 16) -> PagedKVCache:
    cache = PagedKVCache(
        num_layers=2,
        num_blocks=num_blocks,
        block_tokens=BT,
        num_kv_heads=2,
        head_dim=8,
        dtype=dtype,
        device=torch.device(DEVICE),
    )
    cache.data.copy_(torch.randn(cache.data.shape))
    return cache


def down(src: Tier, dst: Tier, keys, blocks=()) -> TierTransfer:
    return TierTransfer(src, dst, list(keys), list(blocks), 0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tier", [Tier.HOST, Tier.DISK])
def test_blocks_come_back_bit_for_bit_into_other_device_blocks(tmp_path, tier, dtype):
    cache = new_cache(dtype)
    store = TierStore(cache, disk_parent=str(tmp_path))
    before = cache.data[:, :, [3, 5]].clone()
    store.apply_outbound([down(Tier.GPU, tier, [30, 50], [3, 5])], [])
    assert store.keys(tier) == {30, 50} and store.num_bytes(tier) == 2 * BT * cache.bytes_per_token
    cache.data.zero_()
    store.apply_promotions([down(tier, Tier.GPU, [50, 30], [0, 11])])
    assert torch.equal(cache.data[:, :, [11, 0]], before)
    assert store.keys(tier) == {30, 50}, "a promotion copies: the lower tier keeps its blocks"


def test_moves_between_lower_tiers_run_in_list_order_and_move(tmp_path):
    cache = new_cache()
    store = TierStore(cache, disk_parent=str(tmp_path))
    before = cache.data[:, :, [1, 2]].clone()
    store.apply_outbound(
        [down(Tier.GPU, Tier.HOST, [1, 2], [1, 2]), down(Tier.HOST, Tier.DISK, [1]), down(Tier.DISK, Tier.HOST, [1])],
        [],
    )
    assert store.keys(Tier.HOST) == {1, 2} and store.keys(Tier.DISK) == set()
    assert list(store.disk_dir.iterdir()) == [], "the moved block's file is deleted"
    store.apply_promotions([down(Tier.HOST, Tier.GPU, [1, 2], [8, 9])])
    assert torch.equal(cache.data[:, :, [8, 9]], before)


def test_drops_free_host_memory_and_delete_files(tmp_path):
    store = TierStore(new_cache(), disk_parent=str(tmp_path))
    store.apply_outbound([down(Tier.GPU, Tier.HOST, [1, 2], [1, 2]), down(Tier.GPU, Tier.DISK, [3, 4], [3, 4])], [])
    assert len(list(store.disk_dir.iterdir())) == 2
    host_blocks = [weakref.ref(store._get(Tier.HOST, k)) for k in (1, 2)]
    store.apply_outbound([], [TierDrop(Tier.HOST, [1, 2]), TierDrop(Tier.DISK, [4])])
    assert [ref() for ref in host_blocks] == [None, None], "no host tensor is kept"
    assert store.num_bytes(Tier.HOST) == 0
    assert store.keys(Tier.DISK) == {3} and len(list(store.disk_dir.iterdir())) == 1


def test_drops_run_after_the_moves_of_their_plan(tmp_path):
    store = TierStore(new_cache(), disk_parent=str(tmp_path))
    store.apply_outbound([down(Tier.GPU, Tier.HOST, [1], [1])], [TierDrop(Tier.HOST, [1])])
    assert store.keys(Tier.HOST) == set()


@pytest.mark.parametrize("tier", [Tier.HOST, Tier.DISK])
def test_a_key_a_tier_does_not_hold_is_refused(tmp_path, tier):
    cache = new_cache()
    store = TierStore(cache, disk_parent=str(tmp_path))
    store.apply_outbound([down(Tier.GPU, tier, [1], [1])], [])
    before = cache.data.clone()
    assert store.apply_promotions([down(tier, Tier.GPU, [1, 2], [5, 6])]) == {2: 6}
    assert torch.equal(cache.data[:, :, 6], before[:, :, 6]), "the failed block is not written"
    assert torch.equal(cache.data[:, :, 5], before[:, :, 1]) and store.keys(tier) == {1}
    store.apply_outbound([], [TierDrop(tier, [2])])  # the engine forgets the failed load's key: expected
    with pytest.raises(TierBlockError, match="does not hold"):
        store.apply_outbound([], [TierDrop(tier, [2])])  # once; after that, a disagreement
    with pytest.raises(TierBlockError, match="holds no block 2"):
        store.apply_outbound([down(tier, Tier.DISK if tier is Tier.HOST else Tier.HOST, [2])], [])


def test_a_file_deleted_behind_the_stores_back_is_refused(tmp_path):
    store = TierStore(new_cache(), disk_parent=str(tmp_path))
    store.apply_outbound([down(Tier.GPU, Tier.DISK, [1], [1])], [])
    for p in store.disk_dir.iterdir():
        p.unlink()
    assert store.apply_promotions([down(Tier.DISK, Tier.GPU, [1], [2])]) == {1: 2}
    store.apply_outbound([], [TierDrop(Tier.DISK, [1])])  # the engine forgets the failed load's key
    assert store.keys(Tier.DISK) == set()


def test_another_blocks_file_under_a_keys_name_is_refused(tmp_path):
    store = TierStore(new_cache(), disk_parent=str(tmp_path))
    store.apply_outbound([down(Tier.GPU, Tier.DISK, [1, 2], [1, 2])], [])
    one, two = (store.disk_dir / f"{k:x}.kvblock" for k in (1, 2))
    two.write_bytes(one.read_bytes())  # a stale or misplaced file: block 1's bytes under key 2
    assert store.apply_promotions([down(Tier.DISK, Tier.GPU, [2], [3])]) == {2: 3}
    assert store.keys(Tier.DISK) == {1}, "the tier forgets a block it could not serve"


def test_close_removes_the_disk_directory_and_forgets_every_block(tmp_path):
    store = TierStore(new_cache(), disk_parent=str(tmp_path))
    assert store.disk_dir is None, "no directory until the disk tier is used"
    store.apply_outbound([down(Tier.GPU, Tier.DISK, [1], [1]), down(Tier.GPU, Tier.HOST, [2], [2])], [])
    store.close()
    assert list(tmp_path.iterdir()) == [] and store.keys(Tier.HOST) == store.keys(Tier.DISK) == set()
    store.close()  # idempotent


def test_a_store_nobody_closed_removes_its_directory_when_collected(tmp_path):
    store = TierStore(new_cache(), disk_parent=str(tmp_path))
    store.apply_outbound([down(Tier.GPU, Tier.DISK, [1], [1])], [])
    assert list(tmp_path.iterdir())
    del store
    gc.collect()
    assert list(tmp_path.iterdir()) == []
