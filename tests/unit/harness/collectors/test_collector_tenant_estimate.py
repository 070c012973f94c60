"""The client's estimate of each tenant's KV: in-flight requests, their tokens, whole blocks."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.collectors.tenant_estimate import (
    GRID_S,
    PoolCapacity,
    estimate_tenant_rows,
    estimate_times,
    record_tenant_estimate,
)
from record.run_record import ESTIMATED_SOURCE, RunRecord, RunRecordWriter

POOL = PoolCapacity(num_blocks=100, block_tokens=16, source="test")


def requests(*rows: dict) -> pd.DataFrame:
    base = {"http_status": 200.0, "first_token_s": None, "completion_tokens": 0}
    return pd.DataFrame([{**base, **row} for row in rows])


def blocks_at(rows: list[dict], t_s: float, tenant: str) -> int:
    return next(r["live_blocks"] for r in rows if r["t_s"] == t_s and r["tenant"] == tenant)


def test_a_request_holds_its_prompt_then_its_streamed_tokens_in_whole_blocks() -> None:
    reqs = requests(
        {
            "tenant": "acme",
            "sent_s": 0.0,
            "first_token_s": 1.0,
            "done_s": 3.0,
            "prompt_tokens": 100,
            "completion_tokens": 50,
        }
    )
    rows = estimate_tenant_rows(reqs, [0.5, 2.0, 3.0], POOL, {"acme": 0.5})
    assert blocks_at(rows, 0.5, "acme") == 7  # ceil(100 / 16): the prompt, nothing streamed yet
    assert blocks_at(rows, 2.0, "acme") == 8  # 100 + half of 50 = 125 tokens
    assert blocks_at(rows, 3.0, "acme") == 0  # answered: released
    assert {r["source"] for r in rows} == {ESTIMATED_SOURCE} and {r["cap"] for r in rows} == {0.5}
    assert rows[1]["share"] == pytest.approx(8 / 100)


def test_tenants_add_up_per_request_and_a_refusal_holds_nothing() -> None:
    reqs = requests(
        {"tenant": "acme", "sent_s": 0.0, "done_s": 10.0, "prompt_tokens": 32},
        {"tenant": "acme", "sent_s": 0.0, "done_s": 10.0, "prompt_tokens": 17},
        {"tenant": "globex", "sent_s": 0.0, "done_s": 10.0, "prompt_tokens": 64, "http_status": 429.0},
        {"tenant": "globex", "sent_s": 0.0, "done_s": 10.0, "prompt_tokens": 16, "http_status": None},
    )
    rows = estimate_tenant_rows(reqs, [5.0], POOL, {"idle": 0.2})
    assert blocks_at(rows, 5.0, "acme") == 2 + 2  # each request's partial block is a whole one
    assert blocks_at(rows, 5.0, "globex") == 1  # the 429 held nothing; the one cut before a status did
    assert blocks_at(rows, 5.0, "idle") == 0  # a capped tenant that sent nothing is a zero, not absent


def test_times_follow_the_records_samples_else_a_grid_over_the_requests() -> None:
    reqs = requests({"tenant": "acme", "sent_s": 1.0, "done_s": 2.0, "prompt_tokens": 1})
    assert estimate_times(pd.DataFrame({"t_s": [0.5, 0.25, 0.5]}), reqs) == [0.25, 0.5]
    assert estimate_times(pd.DataFrame({"t_s": []}), reqs) == [1.0, 1.0 + GRID_S, 2.0]


def test_the_estimate_is_appended_to_the_record_and_says_so(tmp_path) -> None:
    with RunRecordWriter(tmp_path) as writer:
        writer.append(
            "requests",
            [
                {
                    "request_id": "r1",
                    "tenant": "acme",
                    "sent_s": 0.0,
                    "done_s": 2.0,
                    "prompt_tokens": 160,
                    "http_status": 200,
                }
            ],
        )
        writer.append("samples", [{"t_s": 1.0, "usage": 0.1}])
        status = record_tenant_estimate(tmp_path, writer, POOL, {"acme": 0.15})
        missing = record_tenant_estimate(tmp_path, writer, None, {"acme": 0.15})
    ts = RunRecord.table(tmp_path, "tenant_samples")
    assert status.available and "100 blocks of 16 tokens" in status.detail
    assert ts[["t_s", "tenant", "live_blocks", "source"]].values.tolist() == [[1.0, "acme", 10, ESTIMATED_SOURCE]]
    assert not missing.available and "pool capacity" in missing.detail
