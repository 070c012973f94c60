"""The report-section extension point: one protocol, one registry, one factory.

A section turns a run record and its verdict into an HTML fragment. It always renders (a
chart, or a note saying which signal the record lacks) so every report has the same outline.
The default order puts the gate table first, as a reader needs the verdict before the charts,
then the pressure the run reached, which says what the verdict is worth, then a fleet's
replicas side by side.
"""

from __future__ import annotations

from typing import Protocol

from gates import Verdict
from record.errors import UnknownNameError
from record.run_record import RunRecord
from reports.sections.cancel_release import CancelReleaseSection
from reports.sections.churn import ChurnSection
from reports.sections.config import ConfigSection
from reports.sections.gate_table import GateTableSection
from reports.sections.kv_usage import KvUsageSection
from reports.sections.open_loop import OpenLoopSection
from reports.sections.pressure import PressureSection
from reports.sections.queues import QueuesSection
from reports.sections.rejections import RejectionsSection
from reports.sections.replicas import ReplicasSection
from reports.sections.tenant_share import TenantShareSection
from reports.sections.ttft import TtftSection


class ReportSection(Protocol):
    name: str  # also the page anchor
    title: str

    def render(self, record: RunRecord, verdict: Verdict) -> str: ...


SECTIONS: dict[str, ReportSection] = {
    s.name: s
    for s in (
        GateTableSection(),
        PressureSection(),
        ReplicasSection(),
        KvUsageSection(),
        TenantShareSection(),
        QueuesSection(),
        TtftSection(),
        CancelReleaseSection(),
        ChurnSection(),
        RejectionsSection(),
        OpenLoopSection(),
        ConfigSection(),
    )
}

DEFAULT_SECTIONS: tuple[str, ...] = tuple(SECTIONS)


def make_section(name: str) -> ReportSection:
    try:
        return SECTIONS[name]
    except KeyError:
        raise UnknownNameError("report section", name, SECTIONS) from None
