"""Why requests got no answer: the client's view (error codes, timeouts) beside the engine's
(`rejected` reasons), so an explicit 429 and a silent hang are told apart at a glance."""

from __future__ import annotations

import plotly.graph_objects as go

from gates import Verdict
from record.query import events_of
from record.run_record import RunRecord
from reports.page import LEGEND_RIGHT, figure, note
from reports.summary import rejections_by_reason


class RejectionsSection:
    name = "rejections"
    title = "Rejections by reason"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        client = rejections_by_reason(record)
        engine = (
            events_of(record, "rejected")["reason"].fillna("unknown").value_counts().sort_index().to_dict()
            if record.meta.signals.engine_events
            else {}
        )
        if not client and not engine:
            return note("every request was answered (no errors, timeouts or engine rejections)")
        fig = go.Figure()
        for counts, label, color in ((client, "client saw", "#0969da"), (engine, "engine rejected", "#8c959f")):
            if counts:
                fig.add_trace(
                    go.Bar(
                        y=list(counts),
                        x=list(counts.values()),
                        name=label,
                        orientation="h",
                        marker_color=color,
                        text=list(counts.values()),
                        textposition="outside",
                    )
                )
        reasons = set(client) | set(engine)
        fig.update_layout(barmode="group", xaxis_title="requests", yaxis_autorange="reversed", bargap=0.3)
        return figure(fig, "fig-rejections", height_px=160 + 48 * len(reasons), legend=LEGEND_RIGHT)
