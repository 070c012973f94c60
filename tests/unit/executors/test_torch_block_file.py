"""A block file gives back exactly the block written under its key, or refuses to."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from record.errors import TierBlockError  # noqa: E402
from reference_engine.executors.torch_block_file import MAGIC, read_block, write_block  # noqa: E402

pytestmark = pytest.mark.torch
SHAPE = (2, 2, 1, 4, 2, 8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_block_comes_back_bit_for_bit(tmp_path, dtype):
    block = torch.randn(SHAPE).to(dtype)
    write_block(tmp_path / "b", 42, block)
    back = read_block(tmp_path / "b", 42, SHAPE, dtype, pin=False)
    assert back.dtype == dtype and torch.equal(back.view(torch.uint8), block.view(torch.uint8))
    assert [p.name for p in tmp_path.iterdir()] == ["b"], "no temporary file left behind"


def flip_payload_bit(raw: bytearray) -> bytearray:
    raw[-1] ^= 0x80
    return raw


def garble_header(raw: bytearray) -> bytearray:
    start = len(MAGIC) + 4
    raw[start : start + 8] = b"\xff" * 8
    return raw


@pytest.mark.parametrize(
    "damage, why",
    [
        (flip_payload_bit, "checksum"),
        (lambda raw: raw[:-10], "payload"),
        (lambda raw: raw + b"\0", "payload"),
        (garble_header, "header is unreadable"),
        (lambda raw: b"PNG" + raw[3:], "not a kvgate block file"),
        (lambda raw: b"", "not a kvgate block file"),
    ],
    ids=["bit-flip", "truncated", "extended", "garbled-header", "bad-magic", "empty"],
)
def test_a_damaged_file_is_refused(tmp_path, damage, why):
    path = tmp_path / "b"
    write_block(path, 7, torch.randn(SHAPE))
    path.write_bytes(bytes(damage(bytearray(path.read_bytes()))))
    with pytest.raises(TierBlockError, match=why) as err:
        read_block(path, 7, SHAPE, torch.float32, pin=False)
    assert (err.value.tier, err.value.key) == ("disk", 7)


@pytest.mark.parametrize(
    "key, shape, dtype",
    [(8, SHAPE, torch.float32), (7, (2, 2, 1, 8, 2, 4), torch.float32), (7, SHAPE, torch.float16)],
    ids=["another-key", "another-shape", "another-dtype"],
)
def test_another_block_under_this_name_is_refused(tmp_path, key, shape, dtype):
    write_block(tmp_path / "b", 7, torch.randn(SHAPE))
    with pytest.raises(TierBlockError, match="it holds"):
        read_block(tmp_path / "b", key, shape, dtype, pin=False)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(TierBlockError, match="missing"):
        read_block(tmp_path / "nothing", 7, SHAPE, torch.float32, pin=False)
