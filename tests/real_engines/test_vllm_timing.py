"""The timing probe against a real `vllm serve` on CPU that accepts any key (as behind a gateway):
vLLM shares every unsalted block between callers, so tenant B's copy of a prompt tenant A sent
answers as fast as A's own repeat, and the `prefix_timing` gate fails the cross-tenant pair; a
salt per party keeps them apart, and the salt pair passes. With prefix caching off nobody's
repeat is faster: not measurable, never a pass.

    pytest -m real_engine tests/real_engines/test_vllm_timing.py -s     # ~15 min on two cores
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates import GateResult, Outcome, get_gate, load_thresholds
from harness.collectors.isolation import ProbeOptions, probe_isolation
from tests.fixtures.records import RecordBuilder
from tests.real_engines.conftest import ENV_DIR, MODEL_DIR
from tests.real_engines.vllm_server import MODEL, REAL_ENGINE_TIMEOUT_S, VllmServer, missing

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(REAL_ENGINE_TIMEOUT_S)]

KEYS = ["sk-tenant-a", "sk-tenant-b"]
FEWEST_ROUNDS = 1.0  # a budget below one round: the probe's minimum of rounds


def timed(tmp_path: Path, kinds: tuple[str, ...], *extra_args: str) -> tuple[dict, GateResult]:
    if why := missing(ENV_DIR, MODEL_DIR):
        pytest.skip(why)
    options = ProbeOptions(timing=kinds, timing_budget_s=FEWEST_ROUNDS)
    with VllmServer(ENV_DIR, MODEL_DIR, tmp_path / "vllm.log", api_key=None, extra_args=extra_args) as server:
        probes = probe_isolation(server.url, MODEL, KEYS, f"{server.url}/metrics", options).probes
    record = RecordBuilder().healthy().meta(probes=probes).build(tmp_path / "run")
    result = get_gate("prefix_timing").evaluate(record, load_thresholds().for_gate("prefix_timing"))
    return probes, result


def test_unsalted_vllm_fails_the_timing_gate_and_a_salt_per_party_passes(tmp_path: Path, values: dict) -> None:
    probes, result = timed(tmp_path, ("cross_tenant", "cache_salt"))
    values["timing"] = {"explanation": result.explanation, "evidence": result.evidence}
    assert result.outcome is Outcome.FAIL, result.explanation
    assert {m.metric: m.ok for m in result.measurements} == {"max_other_tenant_auc": False, "max_other_salt_auc": True}
    assert probes["cross_tenant"]["isolated"] is False  # the cached-token probe agrees


def test_vllm_without_prefix_caching_is_not_measurable(tmp_path: Path, values: dict) -> None:
    _, result = timed(tmp_path, ("cross_tenant",), "--no-enable-prefix-caching")
    values["timing_uncached"] = {"explanation": result.explanation, "evidence": result.evidence}
    assert result.outcome is Outcome.NOT_MEASURABLE, result.explanation
