"""The router's view of its workers' KV events, and the chaos its admin API makes of it."""

from __future__ import annotations

from collections import Counter

import pytest
from fastapi.exceptions import RequestValidationError

from record.errors import InvalidRequestError
from reference_engine.core.kv_events import BlockStored
from reference_engine.routing import PrefixIndex, prompt_keys
from reference_engine.server import router_chaos
from reference_engine.server.fleet_kv_events import FleetKvEvents
from reference_engine.server.kv_event_wire import encode_batch

TOKENS = list(range(48))


def frames(seq: int, *events) -> list[bytes]:
    return [b"", seq.to_bytes(8, "big"), encode_batch(0.0, list(events))]


def fleet() -> FleetKvEvents:
    kv = FleetKvEvents(PrefixIndex())
    kv.counts[0] = Counter()
    return kv


def test_batches_after_the_snapshot_apply_and_a_gap_is_counted_missed():
    kv = fleet()
    kv._last_seq[0] = 4  # a snapshot that reflects batches 0..4
    kv._on_batch(0, frames(3, BlockStored([9], None, TOKENS[:16], 16)))  # already in the snapshot
    kv._on_batch(0, frames(5, BlockStored([1], None, TOKENS[:16], 16)))
    kv._on_batch(0, frames(8, BlockStored([2], 1, TOKENS[16:32], 16)))
    assert kv.counts[0] == Counter(applied=2, missed=2) and kv.index.num_blocks(0) == 2
    kv._on_batch(0, [b"", b"\x00" * 8, b"not msgpack"])
    assert kv.counts[0]["undecodable"] == 1


def test_dropped_batches_never_reach_the_index_and_a_death_forgets_the_worker():
    kv = fleet()
    kv.chaos.drop_fraction = 1.0
    kv._on_batch(0, frames(0, BlockStored([1], None, TOKENS[:16], 16)))
    assert kv.counts[0]["dropped"] == 1 and kv.index.num_blocks(0) == 0
    kv.chaos.drop_fraction = 0.0
    kv._on_batch(0, frames(1, BlockStored([1], None, TOKENS[:16], 16)))
    assert kv.index.match(prompt_keys(TOKENS, 16)) == {0: 1}
    kv.worker_lost(0)
    assert kv.index.num_blocks(0) == 0 and 0 not in kv._last_seq


def test_chaos_takes_one_change_and_says_what_to_send_otherwise():
    kv = fleet()
    assert router_chaos.apply(kv, router_chaos.parse(b'{"kv_events_delay_s": 2}'))["chaos"]["kv_events_delay_s"] == 2
    with pytest.raises(InvalidRequestError, match="exactly one change"):
        router_chaos.apply(kv, router_chaos.parse(b'{"drop_kv_events": 0.5, "kv_events_delay_s": 1}'))
    with pytest.raises(InvalidRequestError, match="prefix_aware"):
        router_chaos.apply(None, router_chaos.parse(b'{"restart_index": true}'))
    with pytest.raises(RequestValidationError):  # answered 400 by the error handlers
        router_chaos.parse(b'{"drop_kv_events": 2}')
