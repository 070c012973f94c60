"""Evictions, idle-session expiries and preemptions over time, per second, so thrash shows up as
a wall of bars and a calm policy as a trickle."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gates import Verdict
from record.query import events_of
from record.run_record import RunRecord
from reports.page import figure, note, shade_phases
from reports.series import bucket_size_s, per_bucket


class ChurnSection:
    name = "churn"
    title = "Evictions and preemptions over time"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        if not record.meta.signals.engine_events:
            return note("no engine events in this record: evictions and preemptions are unknown")
        events = record.events
        if events.empty:
            return note("the engine event log is empty")
        width_s = bucket_size_s(float(events["t_s"].min()), float(events["t_s"].max()))
        fig = make_subplots(
            rows=2,
            cols=1,
            shared_xaxes=True,
            vertical_spacing=0.08,
            subplot_titles=("blocks reclaimed per second", "preemptions per second"),
        )
        for kind, label, color in (("evicted", "evicted blocks", "#8250df"), ("expired", "expired (idle)", "#8c959f")):
            rows = events_of(record, kind)
            if len(rows):
                rate = per_bucket(rows["t_s"], rows["num_blocks"], width_s) / width_s
                fig.add_trace(
                    go.Bar(x=rate.index, y=rate.values, name=label, marker_color=color, width=width_s), row=1, col=1
                )
        preempted = events_of(record, "preempted")
        for mode, color in (("recompute", "#cf222e"), ("swap", "#bf8700")):
            rows = preempted[preempted["mode"].fillna("recompute") == mode]
            if len(rows):
                rate = per_bucket(rows["t_s"], None, width_s) / width_s
                fig.add_trace(
                    go.Bar(x=rate.index, y=rate.values, name=f"preempted ({mode})", marker_color=color, width=width_s),
                    row=2,
                    col=1,
                )
        cached = record.meta.final.get("num_evicted_cached_blocks")
        cached_note = (
            note(
                f"cached prefix blocks reclaimed for reuse during the run: {int(cached):,} (a run total "
                f"in meta.final, not logged per event)"
            )
            if cached is not None
            else ""
        )
        if not fig.data:
            return note("no eviction, expiry or preemption event in this run") + cached_note
        shade_phases(fig, record.meta.phases)
        fig.update_layout(barmode="stack", xaxis2_title="time (s)")
        return figure(fig, "fig-churn", height_px=420) + note(f"bars are {width_s:g} s buckets") + cached_note
