"""A sweep sends the prefix-isolation probes once, not before every step, and every step's record
holds that one result, with a note on the steps that did not send it.

Against `kvgate serve` started here: two one-second steps, SLO thresholds loosened so that the
first step passes and the second runs (what is counted is probe runs, not the target's speed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates import evaluate, load_thresholds
from harness import live_run
from harness.cli import main
from harness.sweep import MIN_STEP_REQUESTS
from record.run_record import RunRecord
from tests.integration.server_process import running_server

pytestmark = pytest.mark.slow

LOOSE_SLO = "[slo]\nttft_ms = 600000\n\n[goodput]\nmin_fraction = 0.0\n"
PROBE_STATUSES = ("cache_salt_probe", "cross_tenant_probe")


def test_a_sweep_probes_isolation_once_and_every_step_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def counted(base_url: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(base_url)
        return probe(base_url, *args, **kwargs)

    probe = live_run.probe_isolation
    monkeypatch.setattr(live_run, "probe_isolation", counted)
    gates = tmp_path / "loose.toml"
    gates.write_text(LOOSE_SLO)
    out = tmp_path / "sweep"
    rate = f"{MIN_STEP_REQUESTS:g}"  # one second of load a step
    with running_server(tmp_path) as url:
        code = main(
            [
                "sweep",
                *("--target", url, "--tenants", "acme=sk-acme,globex=sk-globex"),
                *("--rates", f"{rate},{2 * MIN_STEP_REQUESTS:g}", "--duration", "1", "--arrivals", "constant"),
                *("--gates", str(gates), "--max-lag-ms", "60000", "--out", str(out)),
            ]
        )
    assert code == 0
    first, second = (RunRecord.load(d) for d in sorted(out.glob("step-*")))
    assert calls == [url]  # once, by the first step
    assert first.meta.probes and second.meta.probes == first.meta.probes
    assert all(second.meta.collectors[s] == first.meta.collectors[s] for s in PROBE_STATUSES)
    said = [n for n in second.meta.notes if n.startswith("isolation probes not sent again")]
    assert len(said) == 1 and first.dir.name in said[0] and "the same target" in said[0]
    assert not any(n.startswith("isolation probes") for n in first.meta.notes)
    judged = [evaluate(r, load_thresholds(), only=("prefix_isolation",)).results[0] for r in (first, second)]
    assert judged[0].outcome == judged[1].outcome and judged[0].evidence == judged[1].evidence
