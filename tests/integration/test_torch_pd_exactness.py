"""A P/D pair on the torch executor moves real KV: the decode side's blocks after a pull hold the
prefill side's bytes, and its answer is the one a single engine gives the same prompt.

Both sides run kvgate-tiny in fp32 with the same seeded weights (torch_helpers.torch_config). The
prompt is three full blocks and a partial one: the pull brings the full blocks, the decode side
computes the rest (one token at least, as every prefix hit leaves) and decodes. A control run
whose pull lands nothing (the import skipped: blocks of zeros) answers differently, so the
comparison can fail.
"""

from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch")

from reference_engine import with_overrides  # noqa: E402
from reference_engine.core.pd import PDCore, PdState  # noqa: E402
from reference_engine.executors.torch_executor import TorchExecutor  # noqa: E402
from tests.helpers import Driver  # noqa: E402
from tests.torch_helpers import BLOCK_TOKENS, torch_config  # noqa: E402

pytestmark = pytest.mark.torch
RNG = random.Random(23)
PROMPT = [RNG.randrange(5, 4096) for _ in range(3 * BLOCK_TOKENS + 5)]
ANSWER = 12


def one_pool_answer() -> list[int]:
    one = Driver(torch_config(64))
    try:
        r = one.add(prompt_token_ids=list(PROMPT), max_new=ANSWER)
        one.run()
        return list(r.output_token_ids)
    finally:
        one.core.close()


def pd_pair() -> PDCore:
    return PDCore(with_overrides(torch_config(64), {"pd.enabled": True}), hash_key=b"t" * 32)


def test_decode_after_a_pull_equals_one_pool_decode_and_the_bytes_were_copied() -> None:
    pd = pd_pair()
    try:
        r = pd.add_request(tenant="acme", prompt_token_ids=list(PROMPT), max_new_tokens=ANSWER)
        pd.run_until(math.inf)
        assert r.state is PdState.FINISHED and r.decode is not None and r.finish_reason == "length"
        assert pd.decode.pool.num_external_hits == 3  # the pulled blocks found, not recomputed
        assert pd.link.bytes_moved == 3 * pd.decode.memory.bytes_per_block
        src, dst = pd.prefill.executor, pd.decode.executor
        assert isinstance(src, TorchExecutor) and isinstance(dst, TorchExecutor)
        for h in r.prefill.block_hashes[:3]:
            p, d = pd.prefill.pool.cached_block(h), pd.decode.pool.cached_block(h)
            assert p is not None and d is not None
            assert torch.equal(src.cache.data[:, :, p], dst.cache.data[:, :, d])
            assert src.cache.data[:, :, p].abs().sum() > 0
        assert r.decode.output_token_ids == one_pool_answer()
    finally:
        pd.close()


def test_a_pull_that_lands_nothing_answers_differently(monkeypatch: pytest.MonkeyPatch) -> None:
    pd = pd_pair()
    try:
        monkeypatch.setattr(pd.decode.executor, "import_blocks", lambda data, block_ids: None)
        r = pd.add_request(tenant="acme", prompt_token_ids=list(PROMPT), max_new_tokens=ANSWER)
        pd.run_until(math.inf)
        assert r.decode is not None and pd.decode.pool.num_external_hits == 3
        assert r.decode.output_token_ids != one_pool_answer()
    finally:
        pd.close()
