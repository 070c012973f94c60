"""An open-loop load's schedule: every request and when it is meant to leave, made once.

    for slot in workload.slots(settings, tenants, duration_s=60):   # the master: one seeded schedule
        ...deal it to one sender...                                 # (loadgen/dealer.py)
    call = slot.call(settings, tenants)                             # the sender: the request itself

A `Slot` is a request small enough to travel in a locust message: its place in the schedule
(`index`), its time (`at_s`, seconds after the schedule's origin), who sends it (a tenant name,
never a key: the sender has the keys) and how to make its prompt (a `ChatText` or a
`TraceText`), not the prompt itself. The master makes the schedule, cheaply and in time order;
each sender builds the prompts of the slots dealt to it (a trace prompt is thousands of words),
so prompt building is spread over the senders and never crosses the network.

Both workloads (loadgen/chat_workload.py: chat at a rate; loadgen/trace_workload.py: a request
trace) make their slots lazily: a schedule of an hour costs nothing until it is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from harness.loadgen.exchange import Call
from harness.loadgen.prompts import Prompt, chat_prompt
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet
from harness.loadgen.trace_prompts import trace_prompt


@dataclass(frozen=True, slots=True)
class ChatText:
    """A chat prompt as short_qa sends it: the shared system prompt, then seeded question words."""

    num_tokens: int
    seed: str

    def build(self, settings: LoadSettings) -> Prompt:
        return chat_prompt(self.num_tokens, seed=self.seed, system=settings.system_prompt, tokens=settings.tokens)


@dataclass(frozen=True, slots=True)
class TraceText:
    """A trace request's prompt: blocks of text chained by its prefix ids (loadgen/trace_prompts.py)."""

    prefix_ids: tuple[int, ...]
    num_tokens: int
    block_tokens: int | None
    filler_seed: str

    def build(self, settings: LoadSettings) -> Prompt:
        return trace_prompt(
            self.prefix_ids,
            self.num_tokens,
            block_tokens=self.block_tokens,
            filler_seed=self.filler_seed,
            tokens=settings.tokens,
        )


PromptText = ChatText | TraceText
_TEXT_KINDS: dict[str, type[ChatText] | type[TraceText]] = {"chat": ChatText, "trace": TraceText}


@dataclass(frozen=True, slots=True)
class Slot:
    """One scheduled request."""

    index: int
    at_s: float
    request_id: str
    scenario: str
    tenant: str
    max_tokens: int | None
    text: PromptText

    def call(self, settings: LoadSettings, tenants: TenantSet) -> Call:
        """The request to send (its prompt built now, with the sender's settings)."""
        return Call(
            request_id=self.request_id,
            scenario=self.scenario,
            phase=settings.phase,
            tenant=tenants.named(self.tenant),
            model=settings.model,
            prompt=self.text.build(settings),
            max_tokens=self.max_tokens,
        )

    def to_message(self) -> list[Any]:
        """Plain data for a locust message (msgpack): a list, the smallest form."""
        kind = next(name for name, cls in _TEXT_KINDS.items() if isinstance(self.text, cls))
        text = [getattr(self.text, f) for f in type(self.text).__slots__]
        return [self.index, self.at_s, self.request_id, self.scenario, self.tenant, self.max_tokens, kind, text]

    @classmethod
    def from_message(cls, data: list[Any]) -> Slot:
        index, at_s, request_id, scenario, tenant, max_tokens, kind, text = data
        text_cls = _TEXT_KINDS[kind]
        values = dict(zip(text_cls.__slots__, text))
        if text_cls is TraceText:
            values["prefix_ids"] = tuple(values["prefix_ids"])
        return cls(index, at_s, request_id, scenario, tenant, max_tokens, text_cls(**values))


class Workload(Protocol):
    """What an open-loop load sends, and when."""

    @property
    def name(self) -> str:
        """The rows' scenario."""
        ...

    def slots(self, settings: LoadSettings, tenants: TenantSet, duration_s: float) -> Iterator[Slot]:
        """The schedule: slots in time order, all before `duration_s`, indexed from 0; lazily."""
        ...

    def describe(self) -> dict[str, Any]:
        """What meta.json says about the load."""
        ...
