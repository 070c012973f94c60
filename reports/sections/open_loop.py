"""The open-loop client: how late requests left, and TTFT from the intended send time.

Only an open-loop load (`kvgate run --rate` / `--trace`, docs/load.md) has intended send times.
The chart shows each request's client lag over the run; the table, TTFT from the actual and from
the intended send (the second adds the lag: what a user who arrived on schedule waited), so a
reader sees what coordinated omission would have hidden. A closed-loop record gets a note.
"""

from __future__ import annotations

import plotly.graph_objects as go

from gates import Verdict
from record.query import percentile
from record.run_record import RunRecord
from reports.page import esc, figure, note, shade_phases, table

PERCENTILES = (50, 95, 99)


class OpenLoopSection:
    name = "open_loop"
    title = "Open-loop client lag"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        rows = record.requests[record.requests["intended_s"].notna()]
        if rows.empty:
            return note(
                "closed loop (locust's users): no intended send times, so latencies are measured from the "
                "actual send, and a slow target slowed its own load down (docs/load.md)"
            )
        lag_ms = (rows["sent_s"] - rows["intended_s"]) * 1000.0
        summary = (record.meta.model_extra or {}).get("live", {}).get("open_loop", {}).get("client_lag", {})
        fig = go.Figure(
            go.Scatter(
                x=rows["intended_s"],
                y=lag_ms,
                mode="markers",
                name="client lag",
                marker={"size": 4, "color": "#0969da"},
            )
        )
        if summary.get("bound_ms") is not None:
            fig.add_hline(y=summary["bound_ms"], line_dash="dash", line_color="#cf222e", annotation_text="P99 bound")
        shade_phases(fig, record.meta.phases)
        fig.update_layout(xaxis_title="intended send (s)", yaxis_title="lag (ms)", yaxis_rangemode="tozero")
        answered = rows[rows["ttft_s"].notna()]
        from_sent, from_intended = (
            answered["ttft_s"] * 1000.0,
            (answered["ttft_s"] + answered["sent_s"] - answered["intended_s"]) * 1000.0,
        )
        cells = [
            [esc(label), *(f"{percentile(series, q):.0f}" if len(series) else "—" for q in PERCENTILES)]
            for label, series in (
                ("TTFT from the actual send, ms", from_sent),
                ("TTFT from the intended send, ms", from_intended),
                ("client lag, ms", lag_ms),
            )
        ]
        return (
            note(
                f"{len(rows)} requests sent on a schedule; P99 client lag {percentile(lag_ms, 99):.1f} ms"
                + (f" against a bound of {summary['bound_ms']:.0f} ms" if "bound_ms" in summary else "")
            )
            + table(["", *(f"P{q}" for q in PERCENTILES)], cells, numeric=(1, 2, 3))
            + figure(fig, "fig-open-loop")
        )
