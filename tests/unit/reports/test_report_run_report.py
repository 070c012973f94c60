import re

import pytest

from record.errors import UnknownNameError
from reports import DEFAULT_SECTIONS, make_section, render_run_report
from reports.page import LIBRARY_FILE
from tests.fixtures.records import RecordBuilder


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([a-z_]+)">', html)


def test_report_has_the_gate_table_first_then_every_chart(healthy_run):
    record, verdict = healthy_run
    path = render_run_report(record, verdict)
    assert path == record.dir / "report.html"
    html = path.read_text()
    assert _sections(html) == list(DEFAULT_SECTIONS) and DEFAULT_SECTIONS[0] == "gates"
    for div in (
        "fig-kv-usage",
        "fig-tenant-share",
        "fig-queues",
        "fig-ttft",
        "fig-cancel-release",
        "fig-churn",
        "fig-rejections",
    ):
        assert f'id="{div}"' in html
    assert "cfg-0123456789ab" in html and "<code>no_oom</code>" in html


def test_report_loads_the_chart_library_from_beside_it(healthy_run):
    record, verdict = healthy_run
    html = render_run_report(record, verdict).read_text()
    assert re.findall(r'<script[^>]+src="([^"]+)"', html) == [LIBRARY_FILE]
    assert (record.dir / LIBRARY_FILE).is_file() and "plotly.js v" not in html


def test_failed_gates_lead_the_table_and_the_worst_tenant_sample_is_marked(failing_run):
    html = render_run_report(*failing_run).read_text()
    table = html[html.index('<section id="gates">') : html.index('<section id="kv_usage">')]
    rows = re.findall(r"<code>([a-z_]+)</code></td><td><span class=\"badge (\w+)\"", table)
    outcomes = [outcome for _, outcome in rows]
    assert outcomes == sorted(outcomes, key=lambda o: o != "fail") and outcomes[0] == "fail"
    assert "worst sample" in html


def test_rendering_is_deterministic(healthy_run, tmp_path):
    a = render_run_report(*healthy_run, out=tmp_path / "a.html").read_bytes()
    b = render_run_report(*healthy_run, out=tmp_path / "b.html").read_bytes()
    assert a == b


def test_missing_signals_render_as_notes_not_charts(tmp_path):
    from gates import evaluate

    record = (
        RecordBuilder()
        .request()
        .signals(engine_events=False, engine_samples=False, tenant_samples=False, gpu_memory=False)
        .build(tmp_path)
    )
    html = render_run_report(record, evaluate(record)).read_text()
    assert "no usage samples in this record" in html and "no per-tenant samples" in html
    assert 'id="fig-kv-usage"' not in html


def test_long_series_are_downsampled(tmp_path, healthy_run):
    from gates import evaluate

    builder = RecordBuilder()
    for i in range(20_000):
        builder.sample(i * 0.5, 400 + i % 300, waiting_batch=i % 7)
    long = builder.build(tmp_path / "long")
    small_bytes = len(render_run_report(*healthy_run, out=tmp_path / "small.html").read_bytes())
    long_bytes = len(render_run_report(long, evaluate(long)).read_bytes())
    assert long_bytes - small_bytes < 600_000  # page bytes, not time: 20,000 samples drawn downsampled


def test_unknown_section_lists_the_valid_ones(healthy_run):
    with pytest.raises(UnknownNameError, match="cancel_release, churn, config"):
        render_run_report(*healthy_run, sections=["gates", "heatmap"])
    assert make_section("ttft").title
