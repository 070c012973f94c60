from __future__ import annotations

from pathlib import Path

import pytest

from harness.target import ReferenceEngine, TargetError, external_target


def test_an_external_target_scrapes_its_own_metrics_unless_told_otherwise() -> None:
    t = external_target("http://127.0.0.1:8000/", None)
    assert (t.url, t.kind, t.metrics_url) == ("http://127.0.0.1:8000", "external", "http://127.0.0.1:8000/metrics")
    assert external_target("http://h:1", "").metrics_url == ""
    assert t.describe("m") == {
        "url": "http://127.0.0.1:8000",
        "kind": "external",
        "metrics_url": "http://127.0.0.1:8000/metrics",
        "model": "m",
        "workers": 0,
    }


def test_an_engine_that_cannot_start_says_why_with_its_log(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[kv_cache]\npolicy = 'nope'\n")
    engine = ReferenceEngine(config, log_path=tmp_path / "engine.log", ready_timeout_s=60)
    with pytest.raises(TargetError, match="exited with code 2 before it was ready(?s:.*)nope"):
        with engine:
            pass
    assert engine.process is not None and engine.process.poll() is not None
