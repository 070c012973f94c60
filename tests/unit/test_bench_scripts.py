"""Every benchmark script still imports and parses its options.

Benchmarks run by hand, not in CI, so a moved module would break them silently; `--help`
imports a script and exits before measuring anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("bench_*.py")))
def test_bench_script_imports_and_parses_its_options(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120, cwd=BENCH.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower()
