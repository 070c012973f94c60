"""`kvgate report`: files written, the verdict shown, usage errors."""

import json

from harness.cli import main
from tests.fixtures.records import RecordBuilder


def test_one_report_per_run(tmp_path, capsys):
    a = RecordBuilder().healthy().write(tmp_path / "a")
    b = RecordBuilder(policy="none").healthy().write(tmp_path / "b")
    assert main(["report", str(a), str(b)]) == 0
    assert (a / "report.html").exists() and (b / "report.html").exists()
    assert capsys.readouterr().out.count("report: ") == 2


def test_compare_writes_one_page(tmp_path):
    a = RecordBuilder().healthy().write(tmp_path / "a")
    b = RecordBuilder(policy="none").healthy().write(tmp_path / "b")
    out = tmp_path / "cmp.html"
    assert main(["report", str(a), str(b), "--compare", "--out", str(out)]) == 0
    assert "kvgate comparison — 2 runs" in out.read_text()


def test_compare_labels_baselines_given_beside_the_runs(tmp_path, capsys):
    a = RecordBuilder().healthy().write(tmp_path / "a")
    b = RecordBuilder(policy="none").meta(config_digest="cfg-none").healthy().write(tmp_path / "b")
    out = tmp_path / "cmp.html"
    assert main(["report", str(a), "--baseline", str(b), "--compare", "--out", str(out)]) == 0
    html = out.read_text()
    assert "<th>lru</th><th>none (baseline)</th>" in html and "baselines (compared, never chosen): none" in html
    assert main(["report", str(a), "--baseline", str(b)]) == 2
    assert "add --compare" in capsys.readouterr().err


def test_report_shows_the_stored_verdict(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = RecordBuilder().healthy().write(tmp_path / "run")
    assert main(["gate", str(run), "--only", "no_oom"]) == 0
    assert len(json.loads((run / "verdict.json").read_text())["results"]) == 1
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "<code>no_oom</code>" in html and "<code>tenant_share</code>" not in html


def test_usage_and_record_errors_exit_2(tmp_path, capsys):
    a = RecordBuilder().healthy().write(tmp_path / "a")
    assert main(["report", str(a), str(a), "--out", str(tmp_path / "x.html")]) == 2
    assert "--compare" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
