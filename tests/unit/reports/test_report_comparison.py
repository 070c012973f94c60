"""The comparison page: configs side by side (repeats in one column), the decision on top, the
best candidate per metric, baselines labelled, links to each run's report, loud banners."""

from __future__ import annotations

import re

from gates import evaluate
from reports import group_runs, render_comparison, render_run_report
from tests.fixtures.records import RecordBuilder
from tests.unit.reports.support import pressed, with_pressure


def _config(tmp_path, name: str, *, repeats: int = 1, ttft_s: float = 0.5, oom: bool = False):
    """`repeats` records of one config, whose interactive P95 TTFT is `ttft_s` (the healthy run's
    answers take at most 0.4 s), 10 ms more in each further repeat."""
    records = []
    for i in range(repeats):
        builder = pressed(RecordBuilder(run_id=f"{name}-r{i + 1}", policy=name).meta(config_digest=f"cfg-{name}"))
        for k in range(60):
            builder.served(f"{name}-extra-{k}", sent_s=12.0 + 0.9 * k, ttft_s=ttft_s + 0.01 * i)
        if oom:
            builder.event("oom", 40.0, num_blocks=3)
        records.append(with_pressure(builder.healthy(), tmp_path / name / f"r{i + 1}"))
    return records


def _render(tmp_path, records, baselines=(), with_reports: bool = False):
    verdicts = [evaluate(r) for r in records]
    for r, v in zip(records, verdicts):
        if with_reports:
            render_run_report(r, v)
    return render_comparison(group_runs(records, verdicts, baselines=baselines), tmp_path / "cmp.html").read_text()


def _row(html: str, label: str) -> list[str]:
    row = re.search(rf"<tr><td>{re.escape(label)}(?: <small>\(decides\)</small>)?</td>(.*?)</tr>", html).group(1)
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_comparison_puts_configs_side_by_side(tmp_path, healthy_run, failing_run):
    (a, va), (b, vb) = healthy_run, failing_run
    html = render_comparison(group_runs([a, b], [va, vb]), tmp_path / "cmp.html").read_text()
    assert re.findall(r'<section id="(\w+)">', html) == ["decision", "gates", "numbers", "charts"]
    assert "<th>lru</th><th>none</th>" in html
    assert "1 of 2 runs failed a gate: none" in html  # the subtitle names the failed policy
    for row in (
        "peak live usage",
        "P95 TTFT interactive (load)",
        "prefix hit ratio (load)",
        "no answer: kv_capacity",
        "no answer: timeout",
        "sessions evicted: watermark",
        "re-prefill: rebuilt sessions",
        "goodput interactive (ok requests/s, load)",
        "no answer, tenant batchco",
        "preemptions: swap",
    ):
        assert _row(html, row)
    for div in ("fig-cmp-ttft", "fig-cmp-memory", "fig-cmp-goodput", "fig-cmp-rejections"):
        assert f'id="{div}"' in html


def test_repeats_of_a_config_share_one_column_with_median_and_range(tmp_path):
    html = _render(tmp_path, _config(tmp_path, "lru", repeats=3))
    assert "kvgate comparison — 3 runs" not in html and "kvgate comparison — 1 configs, 3 runs" in html
    # the median (range), then the 95 % interval of the mean: the repeats' spread (sd 10 ms, t(2)
    # = 4.30) is wider than the bootstrap's, so ± 4.30 × 10 / sqrt(3)
    assert _row(html, "P95 TTFT interactive (load)")[0] == "510 ms (500 ms–520 ms)[485 ms, 535 ms]"
    assert _row(html, "highest rung reached")[0] == "preempt"
    gates = re.search(r"<tr><td><code>no_oom</code></td>(.*?)</tr>", html).group(1)
    assert "(all 3 runs)" in gates


def test_the_decision_names_the_best_candidate_overall_and_per_metric(tmp_path):
    records = (
        _config(tmp_path, "lru", repeats=2, ttft_s=0.6)
        + _config(tmp_path, "multi_queue", repeats=2)
        + _config(tmp_path, "h2o", ttft_s=0.45, oom=True)
        + _config(tmp_path, "none", ttft_s=0.41)
    )
    html = _render(tmp_path, records, baselines=[tmp_path / "none" / "r1"])
    decision = re.findall(r"<li>(.*?)</li>", html)
    assert decision[0].startswith("<b>overall: multi_queue (passed every gate in 2 of 2 runs; better beyond noise")
    assert "not eligible: h2o (failed no_oom in 1 of 1 runs)" in decision
    assert "baselines (compared, never chosen): none" in decision
    # best per metric: any candidate; one run of h2o against two of multi_queue cannot tell 50 ms
    # apart (one degree of freedom), 150 ms from lru it can
    assert (
        "best P95 TTFT interactive (load): h2o 450 ms = multi_queue (no difference beyond noise between them; "
        "better beyond noise than lru)"
    ) in decision
    assert "<th>none (baseline)</th>" in html and "overall: multi_queue" in html[: html.index("</header>")]
    best = _row(html, "P95 TTFT interactive (load)")
    assert (
        best[-2].startswith("h2o 450 ms = multi_queue") and "interactive_ttft judges critical requests only" in best[-1]
    )


def test_a_lead_inside_the_noise_of_repeats_is_no_difference(tmp_path):
    records = _config(tmp_path, "lru", repeats=2, ttft_s=0.505) + _config(tmp_path, "multi_queue", repeats=2)
    html = _render(tmp_path, records)
    # medians by nearest rank: of two runs, the lower (multi_queue 500 ms against lru 505 ms); the
    # repeats spread by 10 ms, so 5 ms tells nothing
    assert _row(html, "P95 TTFT interactive (load)")[-2] == (
        "no difference beyond noise (multi_queue = lru; best median multi_queue 500 ms (500 ms–510 ms))"
    )
    assert "overall: no overall winner at this load and repeat count (2 runs per config)" in html


def test_each_config_links_its_runs_reports_relative_to_the_page(tmp_path):
    html = _render(tmp_path, _config(tmp_path, "lru", repeats=2) + _config(tmp_path, "none"), with_reports=True)
    links = re.findall(r'<a href="([^"]+)" title="run ([^"]+)">(\w+)</a>', html)
    assert links == [
        ("lru/r1/report.html", "lru-r1", "1"),
        ("lru/r2/report.html", "lru-r2", "2"),
        ("none/r1/report.html", "none-r1", "report"),
    ]


def test_runs_below_the_rungs_and_decisions_no_candidate_took_are_called_out(tmp_path):
    calm = RecordBuilder(policy="calm").meta(config_digest="cfg-calm").healthy()
    html = _render(tmp_path, [with_pressure(calm.drop("events", kind="watermark"), tmp_path / "calm")])
    header = html[: html.index("</header>")]
    assert (
        '<div class="alert">1 of 1 runs never reached the evict and preempt rungs (or cannot show it): calm.' in header
    )
    assert (
        '<div class="alert">NOT A COMPARISON OF POLICIES ON SWAP, SESSION EXPIRY: no candidate run took these '
        "decisions even once</div>"
    ) in header
    decision = html[html.index('<section id="decision">') : html.index('<section id="gates">')]
    assert decision.count('<div class="banner fail">') == 2  # the same two, on top of the decision


def test_the_recompute_tax_is_the_gates_own_measurement_or_na(tmp_path, healthy_run):
    from gates import GateResult, Measurement, Unit

    record, verdict = healthy_run
    tax = GateResult.judged("recompute_tax", [Measurement("max_fraction", 0.125, 0.25, Unit.FRACTION)], "12.5%")
    others = tuple(r for r in verdict.results if r.gate != "recompute_tax")
    taxed, untaxed = (
        type(verdict)(**{**verdict.__dict__, "results": results}) for results in (others + (tax,), others)
    )
    html = render_comparison(group_runs([record, record], [taxed, untaxed]), tmp_path / "c.html").read_text()
    assert _row(html, "recompute tax")[0] == "12.5%"  # one config (same digest), the run without it adds nothing
    other = (
        RecordBuilder(policy="none")
        .meta(config_digest="cfg-none")
        .healthy()
        .meta(final={"live_blocks": 40})
        .build(tmp_path / "none")
    )  # no run totals: recompute_tax unmeasurable
    html = render_comparison(group_runs([other], [evaluate(other)]), tmp_path / "d.html").read_text()
    assert _row(html, "recompute tax")[0] == "n/a"
