"""Pressure reached: the section after the gate table, the header line and the loud warning of
a run that never reached the evict and preempt rungs; records without the summary say so."""

from __future__ import annotations

import re

from gates import evaluate
from record.pressure import measure_pressure
from reports import render_run_report
from reports.pressure import decisions_warning, missing_rungs_warning, pressure_line
from tests.fixtures.records import RecordBuilder
from tests.unit.reports.support import pressed, with_pressure


def _section(html: str, name: str) -> str:
    start = html.index(f'<section id="{name}">')
    return html[start : html.index("</section>", start)]


def _header(html: str) -> str:
    return html[html.index("<header>") : html.index("</header>")]


def test_a_run_that_reached_every_rung_that_matters_shows_when_how_often_and_how_long(tmp_path):
    record = with_pressure(pressed(RecordBuilder().healthy()), tmp_path / "run")
    html = render_run_report(record, evaluate(record)).read_text()
    assert re.findall(r'<section id="(\w+)">', html)[:2] == ["gates", "pressure"]
    header = _header(html)
    assert (
        "pressure: reached warn → preempt (peak live usage 93% of the pool); 5 sessions evicted, 2 preemptions, "
        "0 sessions expired"
        in header
        and 'class="alert"' not in header
    )
    rows = re.findall(r"<tr><td><code>(\w+)</code></td><td[^>]*>\d+%</td><td>(\w+|<b>no</b>)</td>", html)
    assert rows == [
        ("warn", "yes"),
        ("admission", "yes"),
        ("evict", "yes"),
        ("pause_batch", "yes"),
        ("preempt", "yes"),
        ("reject", "<b>no</b>"),
    ]
    section = _section(html, "pressure")
    assert "42.0 s (load)" in section and "NEVER REACHED" not in section
    assert '<td>preemptions: recompute</td><td class="num">2</td>' in section


def test_a_run_below_the_evict_and_preempt_rungs_says_so_loudly(tmp_path):
    builder = (
        RecordBuilder().healthy().drop("events", kind="watermark").event("watermark", 30.0, reason="warn", usage=0.76)
    )
    record = with_pressure(builder, tmp_path / "run")
    warning = missing_rungs_warning(record.meta.pressure)
    assert warning.startswith(
        "NEVER REACHED the evict and preempt rungs (evict at 85%, preempt at 92%; peak live usage 80%)"
    )
    html = render_run_report(record, evaluate(record)).read_text()
    assert f'<div class="alert">{warning}</div>' in _header(html)
    assert f'<div class="banner fail">{warning}</div>' in _section(html, "pressure")


def test_a_record_without_the_summary_says_not_recorded(healthy_run):
    html = render_run_report(*healthy_run).read_text()
    assert "pressure not recorded" in _header(html) and 'class="alert"' not in _header(html)
    assert "pressure not recorded" in _section(html, "pressure")


def test_a_record_with_no_level_signal_is_unknown_not_low(tmp_path):
    record = with_pressure(RecordBuilder().request().signals(engine_events=False).meta(watermarks={}), tmp_path / "r")
    assert pressure_line(record.meta.pressure).startswith("pressure unknown")
    assert missing_rungs_warning(record.meta.pressure).startswith("PRESSURE UNKNOWN")


def test_a_comparison_whose_runs_never_took_a_core_decision_says_which(tmp_path):
    calm = measure_pressure(RecordBuilder().healthy().build(tmp_path / "calm"))  # evictions and recomputes only
    assert decisions_warning([calm, None]) == (
        "NOT A COMPARISON OF POLICIES ON SWAP, SESSION EXPIRY: no candidate run took these decisions even once"
    )
    assert decisions_warning([None]) is None  # not recorded: unknown, not absent


def test_a_target_without_a_ladder_is_worded_by_what_it_showed(tmp_path):
    from tests.unit.record.test_record_pressure import vllm_like

    pressed_target = measure_pressure(vllm_like(kv_blocks_removed=103, num_preemptions=6.0).build(tmp_path / "p"))
    assert pressure_line(pressed_target) == (
        "pressure (what the target showed; it has no watermark ladder): peak live usage 98% of the pool; "
        "103 cached blocks reclaimed, 2 preemptions, 1 overload refusals"
    )
    assert missing_rungs_warning(pressed_target) is None
    blind = measure_pressure(vllm_like(num_preemptions=4.0).build(tmp_path / "b"))
    assert "cached blocks reclaimed unknown, 0 preemptions" in pressure_line(blind)
    assert missing_rungs_warning(blind) == (
        "NOT SHOWN: nothing the target reported shows that the load made it evict cached blocks or preempt "
        "a request (unknown without its KV cache events (--kv-events)): this verdict says nothing about what "
        "it does under that pressure"
    )
