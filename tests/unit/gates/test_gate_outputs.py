import dataclasses
import io
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from gates import GATES, evaluate, make_output, write_verdict
from gates.outputs.console import ConsoleOutput
from gates.outputs.step_summary import verdict_markdown
from record.errors import UnknownNameError
from tests.fixtures.records import CONFIG_DIGEST, RecordBuilder


@pytest.fixture
def verdict(tmp_path):
    builder = RecordBuilder().healthy().routed_fleet().event("oom", 40.0, num_blocks=3).signals(tenant_samples=False)
    return evaluate(builder.build(tmp_path / "run"))


def test_junit_has_one_testcase_per_gate_with_failures_and_skips(tmp_path, verdict):
    [json_path, junit_path] = write_verdict(tmp_path, verdict)
    assert json_path.name == "verdict.json"
    root = ET.parse(junit_path).getroot()
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (str(len(GATES)), "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert len(cases) == len(GATES)
    failure = cases["no_oom"].find("failure")
    assert CONFIG_DIGEST in failure.get("message") and "violated" in failure.text
    assert cases["tenant_share"].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["config_digest"] == CONFIG_DIGEST and props["outcome"] == "fail"


def test_console_table_prints_without_a_tty(tmp_path, verdict):
    out = io.StringIO()
    ConsoleOutput(Console(file=out, width=160)).emit(verdict, tmp_path)
    text = out.getvalue()
    assert "\x1b[" not in text  # no colour codes in a log
    assert "FAIL" in text and "NOT MEASURABLE" in text and "no_oom" in text
    assert text.rstrip().splitlines()[-1].startswith(f"FAIL: {len(GATES) - 2} passed, 1 failed, 1 not measurable")


def test_step_summary_appends_markdown_only_when_github_asks(tmp_path, verdict, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert make_output("github").emit(verdict, tmp_path) is None
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    make_output("github").emit(verdict, tmp_path)
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "| `no_oom` | ❌ fail |" in text


def test_markdown_escapes_pipes_in_explanations(verdict):
    first = dataclasses.replace(verdict.results[0], explanation="a | b")
    text = verdict_markdown(dataclasses.replace(verdict, results=[first, *verdict.results[1:]]))
    assert text.count("\n| `") == len(GATES)  # one row per gate: the pipe did not split a row
    assert "a \\| b" in text


def test_unknown_output_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="console, github, json, junit"):
        make_output("yaml")
