"""Paged attention over a block table equals dense attention over the whole sequence."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from reference_engine.catalog import get_model  # noqa: E402
from reference_engine.executors.torch_attention import DenseAttention, PagedAttention, SeqSlice  # noqa: E402
from reference_engine.executors.torch_kv import PagedKVCache  # noqa: E402
from reference_engine.executors.torch_model import (  # noqa: E402
    DecoderShape,
    build_decoder,
    init_random_weights,
)
from tests.torch_helpers import DEVICE  # noqa: E402

pytestmark = pytest.mark.torch
BT = 4  # small blocks: many block boundaries inside short sequences


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)  # steady on a CPU shared with other work
    shape = DecoderShape.from_spec(get_model("kvgate-tiny"), rope_theta=10_000.0, norm_eps=1e-5)
    m = build_decoder(shape, torch.float32, torch.device(DEVICE))
    init_random_weights(m, seed=3)
    return m


def new_cache(model, num_blocks: int = 64) -> PagedKVCache:
    s = model.shape
    return PagedKVCache(
        num_layers=s.num_layers,
        num_blocks=num_blocks,
        block_tokens=BT,
        num_kv_heads=s.num_kv_heads,
        head_dim=s.head_dim,
        dtype=torch.float32,
        device=torch.device(DEVICE),
    )


def dense_hidden(model, ids: list[int]):
    dev = torch.device(DEVICE)
    with torch.inference_mode():
        return model.hidden_states(torch.tensor(ids, device=dev), torch.arange(len(ids), device=dev), DenseAttention())


def paged_steps(model, cache, seqs: dict[str, list[int]], blocks: dict[str, list[int]], schedule, record_mass=False):
    """Run `schedule` (a list of steps, each {name: num_new}) through PagedAttention; return each
    sequence's hidden states in token order and the attention masses of the last step."""
    dev = torch.device(DEVICE)
    done = {name: 0 for name in seqs}
    hidden = {name: [] for name in seqs}
    masses = None
    for step in schedule:
        ids, pos, slices = [], [], []
        for name, n in step.items():
            start = done[name]
            ids += seqs[name][start : start + n]
            pos += range(start, start + n)
            slices.append(SeqSlice(blocks[name], start, n))
        attend = PagedAttention(cache, slices, record_mass=record_mass)
        with torch.inference_mode():
            h = model.hidden_states(torch.tensor(ids, device=dev), torch.tensor(pos, device=dev), attend)
        row = 0
        for name, n in step.items():
            hidden[name].append(h[row : row + n])
            row += n
            done[name] += n
        masses = attend.attention_mass() if record_mass else None
    return {name: torch.cat(hs) for name, hs in hidden.items()}, masses


def scattered_blocks(rng: random.Random, names, num_blocks: int, per_seq: int) -> dict[str, list[int]]:
    ids = list(range(num_blocks))
    rng.shuffle(ids)
    return {name: ids[i * per_seq : (i + 1) * per_seq] for i, name in enumerate(names)}


@pytest.mark.parametrize("record_mass", [False, True], ids=["sdpa", "explicit"])
def test_chunked_prefill_and_batched_decode_over_scattered_blocks_equal_dense(model, record_mass):
    rng = random.Random(0)
    seqs = {
        "a": [rng.randrange(5, 4096) for _ in range(23)],
        "b": [rng.randrange(5, 4096) for _ in range(18)],
        "c": [rng.randrange(5, 4096) for _ in range(10)],
    }
    blocks = scattered_blocks(rng, seqs, 64, 8)
    schedule = [
        {"a": 10},
        {"a": 7, "b": 5},
        {"b": 9, "c": 6},  # chunked prefills, mixed steps
        {"a": 1, "b": 1, "c": 1},
        {"a": 1, "c": 1},
        {"a": 1, "b": 1, "c": 1},  # batched decodes
        {"a": 1, "b": 1, "c": 1},
        {"a": 2, "b": 1},
    ]
    cache = new_cache(model)
    paged, _ = paged_steps(model, cache, seqs, blocks, schedule, record_mass)
    for name, ids in seqs.items():
        n = paged[name].shape[0]
        torch.testing.assert_close(paged[name], dense_hidden(model, ids[:n]), rtol=1e-5, atol=1e-5)


def test_attention_mass_matches_dense_probabilities_and_sums_to_new_tokens(model):
    rng = random.Random(1)
    seqs = {"a": [rng.randrange(5, 4096) for _ in range(14)], "b": [rng.randrange(5, 4096) for _ in range(11)]}
    blocks = scattered_blocks(rng, seqs, 32, 4)
    _, masses = paged_steps(
        model, new_cache(model, 32), seqs, blocks, [{"a": 13, "b": 6}, {"a": 1, "b": 5}], record_mass=True
    )
    mass_a, mass_b = masses
    assert len(mass_a) == 14 and len(mass_b) == 11
    assert sum(mass_a) == pytest.approx(1.0, abs=1e-5)  # one decode query
    assert sum(mass_b) == pytest.approx(5.0, abs=1e-5)  # a 5-token chunk
    expected = _dense_decode_mass(model, seqs["a"])
    assert mass_a == pytest.approx(expected, abs=1e-5)


def _dense_decode_mass(model, ids: list[int]) -> list[float]:
    """Attention of the last token over the whole sequence, averaged over heads and layers,
    computed with a recording dense backend."""
    rows = []

    class Recording(DenseAttention):
        def __call__(self, layer, q, k, v):
            rep = q.shape[1] // k.shape[1]
            kk = k.repeat_interleave(rep, dim=1)
            scores = torch.einsum("hd,thd->ht", q[-1], kk) / q.shape[-1] ** 0.5
            rows.append(scores.softmax(-1).mean(0))
            return super().__call__(layer, q, k, v)

    dev = torch.device(DEVICE)
    with torch.inference_mode():
        model.hidden_states(torch.tensor(ids, device=dev), torch.arange(len(ids), device=dev), Recording())
    return (torch.stack(rows).mean(0)).tolist()


def test_cache_slots_follow_the_block_table(model):
    cache = new_cache(model, 16)
    table = torch.tensor([[7, 2, 9], [1, 0, 0]])
    positions = torch.tensor([[3, 4, 5, 9], [0, 1, 2, 3]])
    assert cache.slots(table, positions).tolist() == [
        [7 * BT + 3, 2 * BT, 2 * BT + 1, 9 * BT + 1],
        [BT, BT + 1, BT + 2, BT + 3],
    ]


def test_swap_copies_restore_blocks_exactly_in_new_places(model):
    cache = new_cache(model, 16)
    cache.data.normal_()
    before = cache.data[:, :, [3, 5]].clone()
    host = cache.copy_out([3, 5])
    assert host.device.type == "cpu" and host.nbytes == 2 * BT * cache.bytes_per_token
    cache.data[:, :, [3, 5]] = 0
    cache.copy_in(host, [11, 0])
    torch.testing.assert_close(cache.data[:, :, [11, 0]], before, rtol=0, atol=0)
