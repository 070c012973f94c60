"""The report renders in a real browser, offline: headless Chromium runs plotly.js from the file beside the page
(the DOM then holds plotly's SVG) and takes a screenshot. Skipped where Chromium is absent
(CI installs it: apt-get install -y chromium)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from reports import group_runs, render_comparison, render_run_report

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)

pytestmark = pytest.mark.skipif(BROWSER is None, reason="headless Chromium is not installed")


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--virtual-time-budget=10000",
    ]
    return subprocess.run([BROWSER, *flags, *args], capture_output=True, text=True, timeout=120)


def test_run_report_renders_its_charts_offline(tmp_path, failing_run):
    page = render_run_report(*failing_run, out=tmp_path / "report.html")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert dom.count('class="main-svg"') >= 7  # plotly drew every chart
    assert "NOT MEASURABLE" in dom or "FAIL" in dom
    shot = tmp_path / "report.png"
    _chromium(tmp_path, "--hide-scrollbars", "--window-size=1400,4000", f"--screenshot={shot}", page.as_uri())
    assert shot.exists() and shot.stat().st_size > 50_000


def test_comparison_renders_offline(tmp_path, healthy_run, failing_run):
    configs = group_runs([healthy_run[0], failing_run[0]], [healthy_run[1], failing_run[1]])
    page = render_comparison(configs, tmp_path / "c.html")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert dom.count('class="main-svg"') >= 4
