"""A hand-made Mooncake-format trace whose prefix hits can be worked out by hand.

Blocks: the engine's are 16 tokens, the trace's 512, so one trace id covers 32 engine blocks.
Requests arrive 10 s apart, so each one finishes (and its prompt blocks go to the prefix cache)
before the next arrives; the pool is far larger than the trace, so nothing is evicted. A request
can hit at most (prompt - 1) // 16 blocks (one token is always computed), and only the prompt's
full blocks are hashed (1100 tokens: 68 full blocks, the 12-token tail is not).

    request  tenant  prompt  ids      what it finds in the cache                  hit blocks
    r1       acme    1100    1 2 3    nothing (first)                              0
    r2       acme    1030    1 2 9    ids 1 2 of r1 = 64 blocks (cap 1029//16 = 64) 64
    r3       acme     600    1 5      id 1 of r1 = 32 blocks                        32
    r4       globex  1100    1 2 3    nothing: acme's blocks are private to acme    0
    r5       acme    1100    1 2 3    all 68 full blocks of r1 (cap 1099//16 = 68)  68
    r6       globex  1100    1 2 3    r4's 68 full blocks                           68

Total 232 hit blocks over 68+64+37+68+68+68 = 373 looked up. With id 1 declared public, r4 also
finds r1's 32 public blocks (and its own 36 private ones stay a miss): 264 hit blocks.
"""

import json

import pandas as pd
import pytest

from harness.replay.driver import Arrival, MaxTokens, ReplayDriver
from harness.replay.loaders import load_trace
from harness.replay.prefix_blocks import PrefixBlockMapper
from record.run_record import RunRecordWriter
from reference_engine import EngineCore, VirtualClock
from tests.helpers import small_config

ROWS = [  # (arrival s, tenant, prompt tokens, trace ids)
    (0, "acme", 1100, [1, 2, 3]),
    (10, "acme", 1030, [1, 2, 9]),
    (20, "acme", 600, [1, 5]),
    (30, "globex", 1100, [1, 2, 3]),
    (40, "acme", 1100, [1, 2, 3]),
    (50, "globex", 1100, [1, 2, 3]),
]


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "handmade.jsonl"
    path.write_text(
        "".join(
            json.dumps({"timestamp": t * 1000, "input_length": n, "output_length": 4, "hash_ids": ids}) + "\n"
            for t, _, n, ids in ROWS
        )
    )
    return load_trace(path)


def replay(trace, run_dir, public_ids=frozenset()):
    """The driver itself, so the test can pick each row's tenant and read the pool's counters."""
    clock = VirtualClock()
    core = EngineCore(small_config(1024), clock=clock)
    mapper = PrefixBlockMapper(
        block_tokens=16,
        trace_block_tokens=trace.prefix_block_tokens,
        public_scope=core.hasher.public_scope,
        public_ids=public_ids,
    )
    arrivals = [Arrival(r, tenant) for r, (_, tenant, _, _) in zip(trace.requests, ROWS)]
    with RunRecordWriter(run_dir) as writer:
        ReplayDriver(
            core,
            clock,
            arrivals,
            writer,
            mapper=mapper,
            max_tokens=MaxTokens.TRACE,
            sample_interval_s=1.0,
            step_by_step=False,
            scenario="handmade",
        ).run()
    events = pd.read_csv(run_dir / "events.csv")
    scheduled = events[events["kind"] == "scheduled"]
    hits = dict(zip(scheduled["request_id"], scheduled["num_tokens"] // 16))
    return core, hits, pd.read_csv(run_dir / "requests.csv")


def test_shared_trace_prefixes_hit_exactly_the_blocks_worked_out_by_hand(trace, tmp_path):
    core, hits, requests = replay(trace, tmp_path)
    assert hits == {"r1": 0, "r2": 64, "r3": 32, "r4": 0, "r5": 68, "r6": 68}
    assert core.pool.num_prefix_hits == 232
    assert core.pool.num_prefix_queries == 373
    assert core.pool.num_evicted_cached == 0
    assert (requests["status"] == "ok").all()


def test_tenants_never_share_private_trace_blocks(trace, tmp_path):
    core, hits, _ = replay(trace, tmp_path)
    assert hits["r4"] == 0  # identical ids to r1, but another tenant


def test_a_public_leading_id_is_shared_across_tenants_and_owned_by_none(trace, tmp_path):
    core, hits, _ = replay(trace, tmp_path, public_ids=frozenset({1}))
    assert hits == {"r1": 0, "r2": 64, "r3": 32, "r4": 32, "r5": 68, "r6": 68}
    assert core.pool.num_prefix_hits == 264
    public_blocks = [
        b for b in range(core.pool.num_blocks) if core.pool.is_cached(b) and core.pool.block_tenant(b) is None
    ]
    assert len(public_blocks) == 32  # id 1's 32 engine blocks, allocated once, to no tenant
