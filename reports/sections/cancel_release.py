"""How long a cancelled request kept its blocks: the distribution the cancel_release gate
judges (same numbers: the gate's own `cancel_latencies`) as a CDF on a log axis — a handful of
cancels and a storm of thousands read the same way — with the limit drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gates import Verdict
from gates.checks.cancel_release import cancel_latencies
from record.run_record import RunRecord
from reports.page import figure, limit_line, note, padded_log_range
from reports.series import cdf_points


class CancelReleaseSection:
    name = "cancel_release"
    title = "Cancel → release latency"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        if not record.meta.signals.engine_events:
            return note("no engine events in this record: release times are unknown")
        latency_ms = pd.Series(cancel_latencies(record), dtype=float) * 1000.0
        if latency_ms.empty:
            return note("no request was cancelled in this run")
        x, y = cdf_points(latency_ms)
        fig = go.Figure(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers" if x.size < 50 else "lines",
                name="cancels",
                line={"color": "#0969da", "shape": "hv"},
            )
        )
        result = verdict.result("cancel_release")
        limits_ms = [m.limit * 1000.0 for m in result.measurements] if result is not None else []
        for limit_ms in limits_ms:
            limit_line(fig, limit_ms, f" P99 limit {limit_ms / 1000:g} s", log_x=True)
            fig.add_hline(y=0.99, line_dash="dot", line_color="#8c959f", line_width=1)
        fig.update_layout(
            xaxis_type="log",
            xaxis_title="cancel → blocks released (ms, log scale)",
            xaxis_range=padded_log_range([*x, *limits_ms]),
            yaxis_title="share of cancels",
            yaxis_tickformat=".0%",
            yaxis_range=[0, 1.02],
        )
        never = int(np.isinf(latency_ms).sum())
        text = (
            f"{len(latency_ms)} cancels; {never} never released (not on the curve)"
            if never
            else f"{len(latency_ms)} cancels, all released"
        )
        return figure(fig, "fig-cancel-release") + note(text)
