"""A trace as an open-loop schedule: times, bounds, sizes and tenants of every format."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.loadgen.prompts import count_tokens
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant, TenantSet
from harness.loadgen.trace_workload import TraceWorkload
from harness.replay.loaders import load_trace

TRACES = Path(__file__).resolve().parents[4] / "tests" / "data" / "traces"
FILES = {
    "mooncake": TRACES / "mooncake" / "conversation_trace_head200.jsonl",
    "azure": TRACES / "azure" / "AzureLLMInferenceTrace_conv_head200.csv",
    "burstgpt": TRACES / "burstgpt" / "BurstGPT_1_head100.csv",
}
TENANTS = TenantSet([Tenant("acme", "sk-acme"), Tenant("globex", "sk-globex"), Tenant("bulk", "sk-bulk", "batch")])
SETTINGS = LoadSettings(model="m")


@pytest.mark.parametrize("fmt", list(FILES))
def test_every_request_keeps_its_time_and_sizes(fmt: str) -> None:
    trace = load_trace(FILES[fmt])
    slots = list(TraceWorkload(trace=trace, max_requests=30).slots(SETTINGS, TENANTS, duration_s=1e9))
    assert [s.index for s in slots] == list(range(30))
    for slot, request in zip(slots, trace.requests):
        call = slot.call(SETTINGS, TENANTS)
        assert slot.at_s == request.arrival_s and call.scenario == f"trace_{fmt}"
        assert call.request_id == f"trace_{fmt}-{request.row}" and call.max_tokens == request.num_output_tokens
        assert count_tokens(call.prompt.messages) == call.prompt.num_tokens == max(request.num_prompt_tokens, 4)
        assert call.tenant.traffic_class == "interactive"


def test_rate_scale_compresses_time_and_duration_cuts_the_trace() -> None:
    trace = load_trace(FILES["azure"])
    plain = [s.at_s for s in TraceWorkload(trace=trace).slots(SETTINGS, TENANTS, duration_s=60.0)]
    fast = [s.at_s for s in TraceWorkload(trace=trace, rate_scale=2.0).slots(SETTINGS, TENANTS, duration_s=60.0)]
    assert all(t < 60.0 for t in plain + fast) and len(fast) > len(plain)
    assert fast[: len(plain) // 2] == pytest.approx([t / 2 for t in plain[: len(plain) // 2]])


def test_a_conversation_stays_with_one_tenant() -> None:
    """Requests that share their first two hash ids (one conversation) come from one tenant."""
    trace = load_trace(FILES["mooncake"])
    tenant_of: dict[tuple[int, ...], set[str]] = {}
    for slot, request in zip(TraceWorkload(trace=trace).slots(SETTINGS, TENANTS, 1e9), trace.requests):
        tenant_of.setdefault(request.prefix_ids[:2], set()).add(slot.tenant)
    assert all(len(names) == 1 for names in tenant_of.values())
    assert {n for names in tenant_of.values() for n in names} == {"acme", "globex"}


def test_size_scale_shrinks_every_request_and_is_recorded() -> None:
    trace = load_trace(FILES["mooncake"])
    workload = TraceWorkload(trace=trace, size_scale=0.125, max_requests=20)
    for slot, request in zip(workload.slots(SETTINGS, TENANTS, duration_s=1e9), trace.requests):
        assert slot.max_tokens == max(1, round(request.num_output_tokens / 8))
        assert slot.call(SETTINGS, TENANTS).prompt.num_tokens == max(round(request.num_prompt_tokens / 8), 4)
    assert workload.describe()["size_scale"] == 0.125
