"""`kvgate replay` end to end on the in-repo trace slices."""

import json
from pathlib import Path

from harness.cli import main
from harness.replay.loaders import load_trace
from record.run_record import TABLES, RunRecord
from reference_engine import EngineCore
from reports.page import LIBRARY_FILE

REPO = Path(__file__).resolve().parents[4]
TRACES = REPO / "tests" / "data" / "traces"
MOONCAKE = TRACES / "mooncake" / "conversation_trace_head200.jsonl"
BURSTGPT = TRACES / "burstgpt" / "BurstGPT_1_head100.csv"
DEFAULT = REPO / "configs" / "default.toml"


def test_replay_writes_a_run_record_and_prints_where(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "replay",
            "--trace",
            str(MOONCAKE),
            "--policy",
            str(DEFAULT),
            "--limit",
            "20",
            "--out",
            str(out),
            "--sample-interval",
            "2",
            "--rate-scale",
            "2",
        ]
    )
    verdict = json.loads((out / "verdict.json").read_text())
    assert code == (1 if verdict["outcome"] == "fail" else 0)  # judged like a live run
    assert (out / "report.html").exists() and (out / "verdict.junit.xml").exists()
    printed = capsys.readouterr().out
    assert "run record:" in printed and str(out) in printed.replace("\n", "")
    record = RunRecord.load(out)
    meta = record.meta
    assert meta.mode == "replay" and meta.policy == "lru" and meta.config_path == str(DEFAULT)
    assert [p.name for p in meta.phases] == ["load", "cooldown"]
    assert meta.phases[0].end_s == load_trace(MOONCAKE, limit=20).duration_s / 2  # rate-scale 2 halves it
    assert meta.signals.engine_events and meta.signals.engine_samples and not meta.signals.gpu_memory
    extra = json.loads((out / "meta.json").read_text())["replay"]
    assert extra["trace"]["format"] == "mooncake" and extra["rate_scale"] == 2.0 and extra["speedup"] > 0
    assert len(record.requests) == 20
    assert (record.samples["t_s"].diff().dropna() == 2.0).all()
    # the pool before the first arrival (the pinned prefix only) and after the drain, alike
    initial, final = meta.initial, meta.final
    assert initial["live_blocks"] == initial["retained_blocks"] == initial["pinned_blocks"] > 0
    assert initial["requests_in_engine"] == initial["pending_blocks"] == initial["cached_blocks"] == 0
    assert initial["free_blocks"] == initial["num_blocks"] - initial["pinned_blocks"]
    assert set(initial) <= set(final) and final["requests_in_engine"] == final["pending_blocks"] == 0
    assert final["computed_tokens"] >= final["recompute_tokens"] >= 0 and final["computed_tokens"] > 0


def test_burstgpt_failed_rows_are_noted_in_the_record(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(
        [
            "replay",
            "--trace",
            str(BURSTGPT),
            "--policy",
            str(DEFAULT),
            "--out",
            str(out),
            "--time-scale",
            "0.01",
            "--tenants",
            "fraction:acme=0.5,batchco=0.5",
        ]
    ) in (0, 1)
    record = RunRecord.load(out)
    assert any("skipped 5 failed" in n for n in record.meta.notes)
    assert len(record.requests) == 95 and set(record.requests["tenant"]) == {"acme", "batchco"}


def test_compare_runs_every_config_on_the_same_trace(tmp_path, capsys):
    none = tmp_path / "none.toml"
    none.write_text(DEFAULT.read_text().replace('policy = "lru"', 'policy = "none"'))
    out = tmp_path / "cmp"
    code = main(
        ["replay", "--trace", str(MOONCAKE), "--compare", str(DEFAULT), str(none), "--limit", "20", "--out", str(out)]
    )
    assert code in (0, 1)
    printed = capsys.readouterr().out
    assert "replay comparison" in printed and "TTFT P95" in printed
    assert sorted(p.name for p in out.iterdir()) == ["comparison.html", "default", "none", LIBRARY_FILE]
    assert not list(out.glob("*/*.js"))  # the run pages load the one chart library at the root
    assert RunRecord.load(out / "none").meta.policy == "none"
    assert RunRecord.load(out / "default").meta.config_digest != RunRecord.load(out / "none").meta.config_digest


def test_compare_side_by_side_writes_the_records_one_after_the_other_would(tmp_path):
    """--jobs replays each config in its own process: the same records (every table, the final
    state), in the same directories, as replaying them in turn."""
    none = tmp_path / "none.toml"
    none.write_text(DEFAULT.read_text().replace('policy = "lru"', 'policy = "none"'))
    runs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}"
        assert main(
            [
                "replay",
                "--trace",
                str(MOONCAKE),
                "--compare",
                str(DEFAULT),
                str(none),
                "--limit",
                "30",
                "--out",
                str(out),
                "--jobs",
                jobs,
            ]
        ) in (0, 1)
        runs[jobs] = {name: RunRecord.load(out / name) for name in ("default", "none")}
    for name in ("default", "none"):
        one, two = runs["1"][name], runs["2"][name]
        assert all(getattr(one, table).equals(getattr(two, table)) for table in TABLES)
        assert one.meta.final == two.meta.final and one.meta.policy == name.replace("default", "lru")


def test_usage_errors_exit_2_with_a_clear_message(tmp_path, capsys):
    assert (
        main(
            [
                "replay",
                "--trace",
                str(MOONCAKE),
                "--policy",
                str(DEFAULT),
                "--tenants",
                "fraction:acme=2",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "fractions must add up to 1" in capsys.readouterr().err
    assert main(["replay", "--trace", str(tmp_path / "nope.jsonl"), "--policy", str(DEFAULT)]) == 2
    assert "no such trace file" in capsys.readouterr().err
    assert main(["replay", "--trace", str(MOONCAKE), "--policy", str(tmp_path / "nope.toml")]) == 2
    assert "no such config file" in capsys.readouterr().err
    assert main(["replay", "--trace", str(MOONCAKE), "--compare", str(DEFAULT), "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
    # a spec no config can serve fails before any replay, side by side or not
    assert (
        main(
            [
                "replay",
                "--trace",
                str(MOONCAKE),
                "--compare",
                str(DEFAULT),
                str(DEFAULT),
                "--jobs",
                "2",
                "--tenants",
                "fraction:nobody=1",
                "--out",
                str(tmp_path / "y"),
            ]
        )
        == 2
    )
    assert "unknown tenant 'nobody'" in capsys.readouterr().err and not (tmp_path / "y").exists()


def test_a_replay_closes_its_engine_at_the_end(tmp_path, monkeypatch):
    """The replayed engine is closed once its record is written (a torch disk tier's files go)."""
    closed: list[EngineCore] = []
    monkeypatch.setattr(EngineCore, "close", lambda core: closed.append(core))
    code = main(["replay", "--trace", str(MOONCAKE), "--policy", str(DEFAULT), "--limit", "5", "--out", str(tmp_path)])
    assert code in (0, 1) and any(core.num_steps > 0 for core in closed)  # the one that replayed (not a sizing one)
