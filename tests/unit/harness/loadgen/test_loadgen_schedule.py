"""A slot crosses a locust message whole, and the sender builds the request the master scheduled."""

from __future__ import annotations

import pytest

from harness.loadgen.arrivals import ArrivalKind, Arrivals
from harness.loadgen.chat_workload import ChatWorkload
from harness.loadgen.prompts import count_tokens
from harness.loadgen.schedule import ChatText, Slot, TraceText
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import Tenant, TenantSet

TENANTS = TenantSet([Tenant("acme", "sk-acme"), Tenant("globex", "sk-globex"), Tenant("bulk", "sk-bulk", "batch")])
SETTINGS = LoadSettings(model="m", prompt_tokens=40, max_tokens=8)


@pytest.mark.parametrize(
    "text",
    [ChatText(num_tokens=40, seed="open_loop_chat-3"), TraceText((7, 8, 9), 1200, 512, "trace_mooncake-3")],
    ids=["chat", "trace"],
)
def test_a_slot_crosses_a_message_whole(text: ChatText | TraceText) -> None:
    slot = Slot(3, 0.25, "r-3", "s", "globex", 16, text)
    assert Slot.from_message(slot.to_message()) == slot


def test_the_sender_builds_the_request_with_its_own_keys_and_model() -> None:
    slot = Slot(0, 0.0, "r-0", "open_loop_chat", "globex", 8, ChatText(num_tokens=40, seed="r-0"))
    call = slot.call(SETTINGS.with_(phase="load"), TENANTS)
    assert (call.request_id, call.tenant.key, call.model, call.max_tokens) == ("r-0", "sk-globex", "m", 8)
    assert count_tokens(call.prompt.messages) == call.prompt.num_tokens == 40
    assert call.prompt.messages[0]["content"] == SETTINGS.system_prompt  # what short_qa sends
    assert slot.call(SETTINGS, TENANTS).prompt == call.prompt  # the same slot, the same words


def test_chat_at_a_rate_is_one_seeded_schedule_over_the_interactive_tenants() -> None:
    workload = ChatWorkload(schedule=Arrivals(kind=ArrivalKind.POISSON, rate_per_s=20.0, seed=4), max_requests=50)
    first, again = (list(workload.slots(SETTINGS, TENANTS, duration_s=60.0)) for _ in range(2))
    assert first == again and [s.index for s in first] == list(range(50))
    assert [s.at_s for s in first] == sorted(s.at_s for s in first)
    assert {s.tenant for s in first} == {"acme", "globex"} and len({s.request_id for s in first}) == 50
