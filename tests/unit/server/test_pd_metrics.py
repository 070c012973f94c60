"""A P/D pair's metrics: each role under vLLM's names, and the link's own."""

from __future__ import annotations

import math

from reference_engine.core.pd import DECODE, PREFILL
from reference_engine.server.metrics import StateCollector, render_families
from reference_engine.server.pd_metrics import pd_families
from tests.unit.reference_engine.test_pd import add, pd_core


def test_metrics_carry_each_role_under_vllm_names_and_the_link_s_own() -> None:
    pd = pd_core()
    add(pd)
    pd.run_until(math.inf)
    sides = {role: list(StateCollector(side.core, "m").collect()) for role, side in pd.sides.items()}
    text = render_families(pd_families(pd, sides)).decode()
    for role in (PREFILL, DECODE):
        assert f'vllm:kv_cache_usage_perc{{model_name="m",role="{role}"}}' in text
        assert f'vllm:prefix_cache_queries_total{{model_name="m",role="{role}"}}' in text
    assert 'kvgate_pd_transfers_total{outcome="started"} 1.0' in text
    assert "kvgate_pd_stranded_reservation_blocks 0.0" in text
    assert text.count("# TYPE vllm:kv_cache_usage_perc gauge") == 1
