"""A prefix promoted back from the host or disk tier gives the logits of one never evicted.

Each case runs the torch executor on hand-built plans (what the engine's scheduler would send):
request A computes a 48-token prefix into device blocks 0-2; a plan demotes those three blocks
by content key while another request's prefill reuses them in the same step; every device block
is then overwritten with garbage; request B, whose prompt starts with A's prefix, promotes the
three blocks into *other* device ids in the plan that prefills its 5-token suffix, then decodes
one token. Its logits are compared with

- a run where A's blocks stayed on the device and B shares them: **bit-identical** (the tiers
  move bytes unchanged, and B's forward sees the same values through another block table);
- a full recompute of B's prompt in fresh blocks: the same greedy tokens and logits within
  1e-5 on CPU (measured: 0.0 with one thread) — the prefix K/V are computed by matmuls over 48
  rows instead of 53, which another BLAS may block (so round) differently; 1e-4 on CUDA, where
  cuBLAS and SDPA also pick kernels by shape. Logits are of unit scale, so both are far below
  the gap between greedy candidates.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

from record.errors import TierBlockError  # noqa: E402
from reference_engine.config.engine_config import TrafficClass  # noqa: E402
from reference_engine.executors.base import BlockCopy, ScheduledChunk, StepPlan, Tier, TierDrop, TierTransfer  # noqa: E402
from reference_engine.executors.torch_executor import TorchExecutor  # noqa: E402
from reference_engine.memory import MemoryPlan  # noqa: E402
from reference_engine.request import Request  # noqa: E402
from tests.torch_helpers import BLOCK_TOKENS, DEVICE, torch_config  # noqa: E402

pytestmark = pytest.mark.torch
PREFIX = 3 * BLOCK_TOKENS
KEYS = [0x5EED_0001, -0x5EED_0002, 0x5EED_0003]  # content keys are signed prefix hashes
RNG = random.Random(19)
PREFIX_IDS = [RNG.randrange(5, 4096) for _ in range(PREFIX)]
SUFFIX_IDS = [RNG.randrange(5, 4096) for _ in range(5)]
OTHER_IDS = [RNG.randrange(5, 4096) for _ in range(PREFIX)]
RECOMPUTE_ATOL = 1e-5 if DEVICE == "cpu" else 1e-4

# Each route: the plans that take the prefix blocks down, as (src, dst) hops, and where they
# are promoted from. A plan's hops run in list order, so a two-hop plan goes through both tiers.
ROUTES = {
    "host": ([[(Tier.GPU, Tier.HOST)]], Tier.HOST),
    "disk": ([[(Tier.GPU, Tier.DISK)]], Tier.DISK),
    "host_then_disk_in_one_plan": ([[(Tier.GPU, Tier.HOST), (Tier.HOST, Tier.DISK)]], Tier.DISK),
    "disk_then_host_in_two_plans": ([[(Tier.GPU, Tier.DISK)], [(Tier.DISK, Tier.HOST)]], Tier.HOST),
}


@pytest.fixture
def executor(tmp_path) -> Iterator[TorchExecutor]:
    config = torch_config(32, torch__disk_tier_dir=str(tmp_path))
    ex = TorchExecutor(config, MemoryPlan.from_config(config))
    ex.keep_logits = True
    yield ex
    ex.close()
    assert list(tmp_path.iterdir()) == [], "closing the executor removes the disk tier's files"


def request(rid: str, ids: list[int], block_ids: list[int], num_computed: int = 0) -> Request:
    r = Request(rid, "acme", TrafficClass.INTERACTIVE, len(ids), 4, 0.0, prompt_token_ids=list(ids))
    r.block_ids, r.num_computed_tokens = block_ids, num_computed
    return r


def step(ex: TorchExecutor, requests: list[Request], **plan_fields) -> None:
    """One plan: each request's remaining known tokens; what it samples joins its output."""
    chunks = [ScheduledChunk(r, r.num_tokens - r.num_computed_tokens) for r in requests]
    outcome = ex.execute(StepPlan(chunks=chunks, **plan_fields))
    for c, sampled in zip(chunks, outcome.sampled):
        c.request.num_computed_tokens += c.num_new_tokens
        c.request.output_token_ids.extend(sampled)


def b_after_prefix(ex: TorchExecutor, b: Request, **plan_fields) -> tuple[list[int], list]:
    """B's suffix prefill (with `plan_fields`, e.g. its promotions) and one decode step."""
    step(ex, [b], **plan_fields)
    step(ex, [b])
    return b.output_token_ids, [ex.logits[b.request_id][i] for i in (0, 1)]


def never_evicted(ex: TorchExecutor):
    step(ex, [request("a", PREFIX_IDS, [0, 1, 2])])
    return b_after_prefix(ex, request("b", PREFIX_IDS + SUFFIX_IDS, [0, 1, 2, 9], PREFIX))


def full_recompute(ex: TorchExecutor):
    b = request("b", PREFIX_IDS + SUFFIX_IDS, [20, 21, 22, 23])
    step(ex, [b])
    step(ex, [b])
    return b.output_token_ids, [ex.logits[b.request_id][i] for i in (0, 1)]


def demote(ex: TorchExecutor, hops_per_plan) -> None:
    """A computes the prefix; its blocks go down the route while C's prefill reuses them."""
    step(ex, [request("a", PREFIX_IDS, [0, 1, 2])])
    for i, hops in enumerate(hops_per_plan):
        transfers = [TierTransfer(src, dst, KEYS, [0, 1, 2] if src is Tier.GPU else [], 0.0) for src, dst in hops]
        reuse = [request("c", OTHER_IDS, [0, 1, 2])] if i == 0 else []
        step(ex, reuse, tier_transfers=transfers)
    ex.cache.data.normal_(0.0, 100.0)  # garbage in every device block


def promote(ex: TorchExecutor, src: Tier):
    b = request("b", PREFIX_IDS + SUFFIX_IDS, [7, 3, 12, 5], PREFIX)
    return b_after_prefix(ex, b, tier_transfers=[TierTransfer(src, Tier.GPU, KEYS, [7, 3, 12], 0.0)])


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    out = {}
    for name, run in (("never_evicted", never_evicted), ("recompute", full_recompute)):
        config = torch_config(32, torch__disk_tier_dir=str(tmp_path_factory.mktemp(name)))
        ex = TorchExecutor(config, MemoryPlan.from_config(config))
        ex.keep_logits = True
        out[name] = run(ex)
        ex.close()
    return out


@pytest.mark.parametrize("route", ROUTES)
def test_a_promoted_prefix_gives_the_logits_of_one_never_evicted(executor, references, route):
    hops, src = ROUTES[route]
    demote(executor, hops)
    assert executor.tiers.keys(src) == set(KEYS)
    tokens, logits = promote(executor, src)

    ref_tokens, ref_logits = references["never_evicted"]
    assert tokens == ref_tokens
    for got, ref in zip(logits, ref_logits):
        assert torch.equal(got, ref), "bit-identical to the run that never evicted the prefix"

    recomputed_tokens, recomputed_logits = references["recompute"]
    assert tokens == recomputed_tokens
    for got, ref in zip(logits, recomputed_logits):
        torch.testing.assert_close(got, ref, rtol=0, atol=RECOMPUTE_ATOL)

    assert executor.tiers.keys(src) == set(KEYS), "a promotion copies: the lower tier keeps the blocks"


def test_the_references_differ_from_a_prefix_of_garbage(references):
    """The comparison has teeth: B over a garbage prefix samples other logits."""
    config = torch_config(32)
    ex = TorchExecutor(config, MemoryPlan.from_config(config))
    ex.keep_logits = True
    ex.cache.data.normal_(0.0, 100.0)
    _, logits = b_after_prefix(ex, request("b", PREFIX_IDS + SUFFIX_IDS, [7, 3, 12, 5], PREFIX))
    assert not torch.allclose(logits[0], references["never_evicted"][1][0], atol=1e-2)


@pytest.mark.parametrize("src", [Tier.HOST, Tier.DISK])
def test_a_corrupt_or_missing_block_is_never_served(executor, src):
    demote(executor, [[(Tier.GPU, src)]])
    if src is Tier.DISK:
        victim = next(p for p in executor.tiers.disk_dir.iterdir() if p.name.startswith(f"{KEYS[1]:x}."))
        raw = bytearray(victim.read_bytes())
        raw[-7] ^= 0x01  # one bit of the payload
        victim.write_bytes(raw)
    else:
        step(executor, [], tier_drops=[TierDrop(Tier.HOST, [KEYS[1]])])
    before = executor.cache.data.clone()
    # B computed in the plan that promotes its prefix: it would read the block that failed
    with pytest.raises(TierBlockError, match="did not bring back") as err:
        promote(executor, src)
    assert err.value.key == KEYS[1]
    assert torch.equal(executor.cache.data[:, :, 3], before[:, :, 3]), "the failed block is not written"
    assert executor.tiers.keys(src) == {KEYS[0], KEYS[2]}, "the tier forgets what it could not serve"
    # the engine's way: the load is reported failed, nothing computed over it; it recomputes
    outcome = executor.execute(StepPlan(tier_transfers=[TierTransfer(src, Tier.GPU, [KEYS[0]], [20], 0.0)]))
    assert outcome.failed_promotions == frozenset()


def test_a_swap_out_reads_its_block_before_a_promotion_of_the_same_plan_overwrites_it(executor):
    """The engine may hand a block it swaps out to a promotion of the same plan (swaps first)."""
    demote(executor, [[(Tier.GPU, Tier.HOST)]])
    d = request("d", OTHER_IDS[:BLOCK_TOKENS], [7])
    step(executor, [d])
    d_block = executor.cache.data[:, :, 7].clone()
    swap_out = [BlockCopy(d, [7], 0.0)]
    promote_into_7 = [TierTransfer(Tier.HOST, Tier.GPU, KEYS, [7, 3, 12], 0.0)]
    executor.execute(StepPlan(swap_out=swap_out, tier_transfers=promote_into_7))
    executor.execute(StepPlan(swap_in=[BlockCopy(d, [30], 0.0)]))
    assert torch.equal(executor.cache.data[:, :, 30], d_block), "the swapped copy is d's, not the prefix"
    assert not torch.equal(executor.cache.data[:, :, 7], d_block)
