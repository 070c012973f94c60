"""Queue depths per traffic class, with running and swapped requests for scale."""

from __future__ import annotations

import plotly.graph_objects as go

from gates import Verdict
from record.run_record import RunRecord
from reports.page import CLASS_COLORS, figure, note, shade_phases
from reports.series import downsample_max

SERIES = (
    ("waiting_interactive", "waiting interactive", CLASS_COLORS["interactive"], "solid"),
    ("waiting_batch", "waiting batch", CLASS_COLORS["batch"], "solid"),
    ("waiting_system", "waiting system", CLASS_COLORS["system"], "solid"),
    ("num_running", "running", "#57606a", "dot"),
    ("num_swapped", "swapped to host", "#1a7f37", "dot"),
)


class QueuesSection:
    name = "queues"
    title = "Queue depths per class"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        present = [row for row in SERIES if record.samples[row[0]].notna().any()]
        if not present:
            return note("no queue depths in this record's samples")
        frame = downsample_max(record.samples, "t_s", [row[0] for row in present])
        fig = go.Figure()
        for column, label, color, dash in present:
            fig.add_trace(
                go.Scatter(
                    x=frame["t_s"],
                    y=frame[column],
                    name=label,
                    mode="lines",
                    line={"color": color, "dash": dash, "width": 1.5},
                )
            )
        shade_phases(fig, record.meta.phases)
        fig.update_layout(xaxis_title="time (s)", yaxis_title="requests", yaxis_rangemode="tozero")
        return figure(fig, "fig-queues")
