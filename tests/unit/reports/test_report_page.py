"""Pages stay small and offline: one chart library per output directory, loaded by a relative
path, never a network URL; a page under 1 MB however long the run."""

from __future__ import annotations

import re
from pathlib import Path

from gates import evaluate
from reports import group_runs, render_comparison, render_run_report
from reports.page import LIBRARY_FILE
from tests.fixtures.records import RecordBuilder

MAX_PAGE_BYTES = 1_000_000


def _script_sources(page: Path) -> list[str]:
    return re.findall(r'<script[^>]+src="([^"]+)"', page.read_text())


def _long_run(tmp_path: Path):
    """An hour of samples every 0.5 s, 14 tenants, thousands of requests and events."""
    builder = RecordBuilder().healthy()
    tenants = [f"tenant-{i}" for i in range(14)]
    for i in range(7_200):
        builder.sample(i * 0.5, 400 + i % 500, waiting_batch=i % 7)
        builder.tenant_sample(i * 0.5, tenants[i % 14], 50 + i % 90)
    for i in range(3_000):
        builder.served(f"long-{i}", sent_s=10 + i * 0.02, ttft_s=0.1 + (i % 50) / 100, tenant=tenants[i % 14])
        builder.event("evicted", 10 + i * 0.02, num_blocks=4, reason="watermark", tenant=tenants[i % 14])
    record = builder.build(tmp_path / "long")
    return record, evaluate(record)


def test_pages_stay_under_1_mb_and_reference_no_network_url(tmp_path, healthy_run):
    long_run = _long_run(tmp_path)
    pages = [
        render_run_report(*long_run),
        render_run_report(*healthy_run),
        render_comparison(
            group_runs([long_run[0], healthy_run[0]], [long_run[1], healthy_run[1]]), tmp_path / "cmp.html"
        ),
    ]
    for page in pages:
        html = page.read_text()
        assert page.stat().st_size < MAX_PAGE_BYTES, page
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), page
        assert all((page.parent / src).is_file() for src in _script_sources(page))


def test_pages_of_one_tree_share_one_library_at_its_root(tmp_path):
    root = tmp_path / "matrix"
    records = [RecordBuilder(run_id=f"run-{i}").healthy().build(root / f"cfg-{i}" / f"cfg-{i}-r1") for i in range(2)]
    verdicts = [evaluate(r) for r in records]
    pages = [render_run_report(r, v, library_dir=root) for r, v in zip(records, verdicts)]
    pages.append(render_comparison(group_runs(records, verdicts), root / "comparison.html"))
    assert [_script_sources(p) for p in pages] == [[f"../../{LIBRARY_FILE}"]] * 2 + [[LIBRARY_FILE]]
    assert sorted(p.name for p in root.rglob("*.js")) == [LIBRARY_FILE]


def test_a_page_without_its_library_says_so(healthy_run):
    html = render_run_report(*healthy_run).read_text()
    assert "if (!window.Plotly)" in html and "copy the directory the pages were written to" in html
