"""Each loader on its slice of the shared traces (tests/data/traces, license notes beside them)."""

import json
from pathlib import Path

import pytest

from harness.replay.loaders import LOADERS, detect_format, load_trace
from harness.replay.trace import TraceError
from record.errors import UnknownNameError

TRACES = Path(__file__).resolve().parents[3] / "data" / "traces"
MOONCAKE = TRACES / "mooncake" / "conversation_trace_head200.jsonl"
AZURE = TRACES / "azure" / "AzureLLMInferenceTrace_conv_head200.csv"
BURSTGPT = TRACES / "burstgpt" / "BurstGPT_1_head100.csv"


def test_every_slice_has_its_license_and_attribution_beside_it():
    for path in (MOONCAKE, AZURE, BURSTGPT):
        assert (path.parent / "LICENSE").stat().st_size > 1000
        assert "License" in (path.parent / "README.md").read_text()


@pytest.mark.parametrize("path, name", [(MOONCAKE, "mooncake"), (AZURE, "azure"), (BURSTGPT, "burstgpt")])
def test_auto_detects_each_format(path, name):
    assert detect_format(path) == name
    assert load_trace(path).format == name


def test_mooncake_keeps_prefix_ids_and_millisecond_arrivals():
    trace = load_trace(MOONCAKE)
    assert len(trace.requests) == trace.num_rows == 200
    assert trace.prefix_block_tokens == 512
    first = trace.requests[0]
    assert (first.row, first.arrival_s, first.num_prompt_tokens, first.num_output_tokens) == (1, 0.0, 6758, 500)
    assert first.prefix_ids == tuple(range(14))
    assert trace.requests[-1].arrival_s == 72.0
    assert all(len(r.prefix_ids) == -(-r.num_prompt_tokens // 512) for r in trace.requests)


def test_azure_arrivals_are_seconds_since_the_first_row_and_there_are_no_prefixes():
    trace = load_trace(AZURE)
    assert len(trace.requests) == 200
    first, second = trace.requests[:2]
    assert first.arrival_s == 0.0
    assert second.arrival_s == pytest.approx(4.314579, abs=1e-6)  # 18:15:50.9951690 - 18:15:46.6805900
    assert (first.num_prompt_tokens, first.num_output_tokens) == (374, 44)
    assert trace.prefix_block_tokens is None and all(not r.prefix_ids for r in trace.requests)
    assert any("no prefix" in note for note in trace.notes)


def test_burstgpt_skips_failed_rows_and_counts_them():
    trace = load_trace(BURSTGPT)
    assert trace.num_rows == 100
    assert len(trace.requests) == 95  # 5 rows with 0 response tokens: failed requests
    assert any("skipped 5 failed" in note for note in trace.notes)
    assert trace.requests[0].arrival_s == 0.0  # rebased: the first row is at 5 s of the day
    assert trace.requests[1].arrival_s == 40.0
    assert {r.model for r in trace.requests} == {"ChatGPT", "GPT-4"}
    assert all(r.num_output_tokens > 0 and r.num_prompt_tokens > 0 for r in trace.requests)


def test_limit_keeps_the_first_replayable_requests():
    assert len(load_trace(MOONCAKE, limit=7).requests) == 7
    assert [r.row for r in load_trace(BURSTGPT, limit=30).requests][-1] == 31  # row 21 was a failure
    with pytest.raises(TraceError, match="at least 1"):
        load_trace(MOONCAKE, limit=0)


def test_explicit_format_and_unknown_format_name():
    assert load_trace(AZURE, "azure").format == "azure"
    with pytest.raises(UnknownNameError, match="valid: auto, azure, burstgpt, mooncake"):
        load_trace(AZURE, "parquet")
    assert set(LOADERS) == {"mooncake", "azure", "burstgpt"}


def test_bad_files_name_the_file_row_and_fix(tmp_path):
    with pytest.raises(TraceError, match="no such trace file"):
        load_trace(tmp_path / "missing.jsonl")
    odd = tmp_path / "odd.txt"
    odd.write_text("hello\n")
    with pytest.raises(TraceError, match="pass --format"):
        load_trace(odd)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"timestamp": 0, "input_length": 1100, "output_length": 3, "hash_ids": [1, 2]}) + "\n")
    with pytest.raises(TraceError, match="line 1: 2 hash_ids for input_length 1100"):
        load_trace(bad, "mooncake")
    csv = tmp_path / "azure.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,many,3\n")
    with pytest.raises(TraceError, match="row 1: ContextTokens must be an integer"):
        load_trace(csv)
    empty = tmp_path / "failed_only.csv"
    empty.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,GPT-4,10,0,10,x\n")
    with pytest.raises(TraceError, match="no replayable request"):
        load_trace(empty)
