"""Time to first token as a CDF per traffic class (load phase), with the unloaded interactive
baseline dashed beside it and the gate's limit drawn, so degradation under load is visible."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gates import Verdict, slo
from record.query import requests_in_phase, ttft_ms
from record.run_record import RunRecord
from reports.page import CLASS_COLORS, figure, limit_line, note, padded_log_range
from reports.series import cdf_points
from reports.summary import TRAFFIC_CLASSES


class TtftSection:
    name = "ttft"
    title = "TTFT per class (CDF)"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        load = requests_in_phase(record, "load")
        curves = [(f"{c} (load)", ttft_ms(load, c), CLASS_COLORS[c], "solid") for c in TRAFFIC_CLASSES]
        baseline = ttft_ms(requests_in_phase(record, "baseline"), "interactive")
        curves.append(("interactive (baseline, unloaded)", baseline, CLASS_COLORS["interactive"], "dash"))
        fig = go.Figure()
        hangs = []
        for label, values, color, dash in curves:
            x, y = cdf_points(values)
            if x.size:
                fig.add_trace(
                    go.Scatter(
                        x=x,
                        y=y,
                        name=f"{label}, n={len(values)}",
                        mode="lines",
                        line={"color": color, "dash": dash, "shape": "hv"},
                    )
                )
            if num_hung := int(np.isinf(values).sum()):
                hangs.append(f"{label}: {num_hung} timed out without a first token (not on the curve)")
        if not fig.data:
            return note("no request got a first token in this record")
        result = verdict.result("interactive_ttft")
        limit = next((m.limit for m in result.measurements if m.metric == slo.TTFT_MS), None) if result else None
        if limit is not None:
            limit_line(fig, limit, f" interactive P95 limit {limit:.0f} ms", log_x=True)
            fig.add_hline(y=0.95, line_dash="dot", line_color="#8c959f", line_width=1)
        xs = [x for trace in fig.data for x in trace.x] + ([limit] if limit is not None else [])
        fig.update_layout(
            showlegend=True,
            xaxis_type="log",
            xaxis_title="TTFT (ms, log scale)",
            xaxis_range=padded_log_range(xs),
            yaxis_title="share of requests",
            yaxis_tickformat=".0%",
            yaxis_range=[0, 1.02],
        )
        return figure(fig, "fig-ttft") + "".join(note(h) for h in hangs)
