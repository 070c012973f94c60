import re

from reports import render_comparison


def test_comparison_puts_runs_side_by_side(tmp_path, healthy_run, failing_run):
    (a, va), (b, vb) = healthy_run, failing_run
    html = render_comparison([a, b], [va, vb], tmp_path / "cmp.html").read_text()
    assert re.findall(r'<section id="(\w+)">', html) == ["gates", "numbers", "charts"]
    assert "<th>lru</th><th>none</th>" in html
    assert "1 of 2 runs failed a gate: none" in html  # the subtitle names the failed policy
    for row in ("peak live usage", "P95 TTFT interactive (load)", "evicted blocks (events)", "rejected: kv_capacity",
                "rejected: timeout", "goodput (tokens/s)"):
        assert f"<td>{row}</td>" in html
    for div in ("fig-cmp-ttft", "fig-cmp-memory", "fig-cmp-goodput", "fig-cmp-rejections"):
        assert f'id="{div}"' in html


def test_runs_of_the_same_policy_are_labelled_by_run_id(tmp_path, healthy_run):
    record, verdict = healthy_run
    html = render_comparison([record, record], [verdict, verdict], tmp_path / "cmp.html").read_text()
    assert "<th>run-test</th><th>run-test</th>" in html
