"""vLLM's KV cache events: counting, thrash, lost batches, and a real ZMQ round trip."""

from __future__ import annotations

from itertools import count

import msgspec
import zmq

from harness.collectors.kv_events import KvEventStats, KvEventSubscriber
from harness.target import free_port
from tests.waiting import wait_for


def stored(*hashes: object) -> dict:
    return {
        "type": "BlockStored",
        "block_hashes": list(hashes),
        "parent_block_hash": None,
        "token_ids": [1, 2],
        "block_size": 16,
        "lora_id": None,
        "medium": "GPU",
    }


def removed(*hashes: object) -> dict:
    return {"type": "BlockRemoved", "block_hashes": list(hashes), "medium": "GPU"}


def test_a_block_stored_again_after_its_removal_is_thrash() -> None:
    stats = KvEventStats()
    stats.add_batch(0, [1.0, [stored(b"a", b"b", b"c")]])
    stats.add_batch(1, [2.0, [removed(b"a", b"b")]])
    stats.add_batch(2, [3.0, [stored(b"a"), stored(b"d")]])
    assert stats.final() == {
        "kv_blocks_stored": 5,
        "kv_blocks_removed": 2,
        "kv_all_cleared": 0,
        "kv_blocks_restored": 1,
        "kv_batches_missed": 0,
    }


def test_a_clear_forgets_removals_and_a_sequence_gap_is_counted_as_lost() -> None:
    stats = KvEventStats()
    stats.add_batch(0, [1.0, [removed(7)]])
    stats.add_batch(4, [2.0, [{"type": "AllBlocksCleared"}], 0])
    stats.add_batch(5, [3.0, [["BlockStored", [7], None, [1], 16, None, "GPU"]]])  # array-like events too
    final = stats.final()
    assert final["kv_batches_missed"] == 3 and final["kv_all_cleared"] == 1 and final["kv_blocks_restored"] == 0


def test_a_subscriber_listening_gets_what_a_connecting_publisher_sends() -> None:
    port = free_port()
    subscriber = KvEventSubscriber(f"listen:tcp://127.0.0.1:{port}").start()
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.connect(f"tcp://127.0.0.1:{port}")
    try:
        payload = msgspec.msgpack.encode([1.0, [stored(b"x", b"y")], 0])
        seq = count()

        def delivered() -> bool:  # PUB drops until the connection is up: resend
            pub.send_multipart((b"kv", next(seq).to_bytes(8, "big"), payload))
            return subscriber.stats.num_batches > 0

        wait_for(delivered, "a batch arrives")
    finally:
        subscriber.stop()
        pub.close(linger=0)
    assert subscriber.stats.blocks_stored >= 2 and subscriber.num_undecodable == 0
