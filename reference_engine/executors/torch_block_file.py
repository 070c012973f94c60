"""One KV block as one file: what the torch executor's disk tier writes and reads back.

A file is a small header and the block's raw bytes:

    b"KVGBLK1\\n" | header length (4 bytes, little-endian) | header (JSON) | payload

The header names the block's content key, dtype and shape, the payload's size and its SHA-256
digest. A read checks all of them against what the caller expects, so a block that is missing,
truncated, flipped, or another block under this name (another key, shape or dtype) raises
`TierBlockError` and is never handed to the device. The digest is the disk tier's main CPU
cost; SHA-256 rather than BLAKE2b because CPUs with SHA instructions hash a 128 KiB block with
it about 2.8× faster (measured on this project's development machine).

A write goes to `<name>.tmp` and is renamed over `<name>`: a reader sees the old file or the
new one, never half of one. There is no fsync — the disk tier is a cache that lives as long as
its executor, and a file a crash left short fails its checksum like any other corruption.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from torch import Tensor

from record.errors import TierBlockError

MAGIC = b"KVGBLK1\n"
_LEN_BYTES = 4


def _digest(payload: memoryview) -> str:
    return hashlib.sha256(payload).hexdigest()


def _payload(block: Tensor) -> memoryview:
    """The bytes of a contiguous host tensor, without copying them."""
    return block.view(torch.uint8).numpy().reshape(-1).data


def write_block(path: Path, key: int, block: Tensor) -> None:
    """Store `block` (a contiguous host tensor) under `key` at `path`, atomically."""
    payload = _payload(block)
    header = json.dumps(
        {
            "key": key,
            "dtype": str(block.dtype).removeprefix("torch."),
            "shape": list(block.shape),
            "num_bytes": payload.nbytes,
            "sha256": _digest(payload),
        }
    ).encode()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(MAGIC + len(header).to_bytes(_LEN_BYTES, "little") + header)
        f.write(payload)
    os.replace(tmp, path)


def read_block(path: Path, key: int, shape: tuple[int, ...], dtype: torch.dtype, *, pin: bool) -> Tensor:
    """The block stored under `key` at `path`, as a host tensor (pinned if `pin`), after checking
    that it is that key's block, of `shape` and `dtype`, and that its bytes are the ones written."""

    def refuse(why: str) -> TierBlockError:
        return TierBlockError(f"disk tier block {key} ({path}): {why}; it is not served", tier="disk", key=key)

    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise refuse("the file is missing") from None
    with f:
        try:
            if f.read(len(MAGIC)) != MAGIC:
                raise refuse("not a kvgate block file")
            header = json.loads(f.read(int.from_bytes(f.read(_LEN_BYTES), "little")))
            expected = {"key": key, "dtype": str(dtype).removeprefix("torch."), "shape": list(shape)}
            found = {name: header.get(name) for name in expected}
            if found != expected:
                raise refuse(f"it holds {found}, not {expected}")
            block = torch.empty(shape, dtype=dtype, pin_memory=pin)
            payload = _payload(block)
            if header.get("num_bytes") != payload.nbytes or f.readinto(payload) != payload.nbytes or f.read(1):
                raise refuse(f"its payload is not the {payload.nbytes} bytes of the block")
        except (ValueError, UnicodeDecodeError, AttributeError) as err:  # a garbled header
            raise refuse(f"its header is unreadable ({err})") from None
        if _digest(payload) != header.get("sha256"):
            raise refuse("its checksum does not match its bytes")
    return block
