"""Token-level compaction on the torch executor: the kept tokens' K/V really move."""

import pytest

torch = pytest.importorskip("torch")

from reference_engine import EngineCore, VirtualClock  # noqa: E402
from reference_engine.config import TrafficClass  # noqa: E402
from reference_engine.executors.base import KVCompaction, StepPlan  # noqa: E402
from reference_engine.request import Request  # noqa: E402
from tests.torch_helpers import torch_config  # noqa: E402

pytestmark = pytest.mark.torch


def test_the_kept_tokens_kv_moves_to_the_front_in_every_layer():
    core = EngineCore(torch_config(64), clock=VirtualClock())
    cache = core.executor.cache
    bt = cache.block_tokens
    table = [5, 2, 9]
    slots = torch.tensor([b * bt + i for b in table for i in range(bt)])
    flat = cache.data.view(*cache.data.shape[:2], -1, *cache.data.shape[4:])  # [layers, K/V, slots, heads, dim]
    flat[:, :, slots] = torch.arange(len(slots), dtype=flat.dtype)[None, None, :, None, None]
    r = Request("r", "acme", TrafficClass.INTERACTIVE, num_prompt_tokens=48, max_new_tokens=1, arrival_s=0.0)
    src = [3, 20, 21, 40, 47]  # the KV indices kept after the first three, moved to 3..7
    core.executor.execute(StepPlan(compactions=[KVCompaction(r, table, src, 3)]))
    assert flat[0, 1, slots[:8], 0, 0].tolist() == [0, 1, 2, 3, 20, 21, 40, 47]
    assert flat[-1, 0, slots[4], -1, -1].item() == 20  # every layer, K and V, every head and dim
