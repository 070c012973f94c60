"""KV usage over time: live (running work + retained state), in flight, and cached blocks as
shares of the pool, with the watermark ladder drawn across, so a reader sees which rung the run
reached and whether usage levelled off there. An engine with KV tiers below the pool adds each
tier's blocks as a share of that tier (its capacity from `meta.final.tiers`)."""

from __future__ import annotations

import plotly.graph_objects as go

from gates import Verdict
from record.query import active_usage, live_usage
from record.run_record import RunRecord
from reports.page import note, share_chart
from reports.series import downsample_max

WATERMARK_COLORS = {
    "warn": "#bf8700",
    "admission": "#bc4c00",
    "evict": "#8250df",
    "pause_batch": "#6e7781",
    "preempt": "#cf222e",
    "reject": "#82071e",
}

TIER_COLORS = {"host": "#bf3989", "disk": "#953800"}  # the KV tiers below the pool, dashed


class KvUsageSection:
    name = "kv_usage"
    title = "KV usage over time"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        s = record.samples
        if s.empty:
            return note("no usage samples in this record (signals.engine_samples / prometheus are false)")
        frame = s.assign(
            live=live_usage(s),
            in_flight=active_usage(s),
            cached=s["cached_blocks"] / s["num_blocks"],
            gpu=s["gpu_mem_used_bytes"] / s["gpu_mem_total_bytes"],
        )
        capacity = {t: int(v.get("capacity_blocks", 0)) for t, v in (record.meta.final.get("tiers") or {}).items()}
        tiers = [t for t in TIER_COLORS if capacity.get(t)]
        frame = frame.assign(**{t: s[f"{t}_tier_blocks"] / capacity[t] for t in tiers})
        frame = downsample_max(frame, "t_s", ["live", "in_flight", "cached", "gpu", *tiers])
        fig = go.Figure()
        for column, label, color in (
            ("live", "live (running + retained)", "#0969da"),
            ("in_flight", "in flight (live − retained)", "#54aeff"),
            ("cached", "cached (reusable, not usage)", "#8c959f"),
            ("gpu", "GPU memory used / total", "#1a7f37"),
            *((t, f"{t} tier used / its capacity", TIER_COLORS[t]) for t in tiers),
        ):
            if frame[column].notna().any():
                fig.add_trace(
                    go.Scatter(
                        x=frame["t_s"],
                        y=frame[column],
                        name=label,
                        mode="lines",
                        line={
                            "color": color,
                            "width": 2 if column == "live" else 1.3,
                            "dash": "dash" if column in TIER_COLORS else "solid",
                        },
                    )
                )
        # Watermarks are legend entries, not annotations: rungs 3 % apart would print labels on top
        # of each other, and a reader can toggle them.
        span = [frame["t_s"].min(), frame["t_s"].max()]
        for mark, level in record.meta.watermarks.items():
            if mark in WATERMARK_COLORS:
                fig.add_trace(
                    go.Scatter(
                        x=span,
                        y=[level, level],
                        name=f"{mark} watermark {level:.0%}",
                        mode="lines",
                        line={"color": WATERMARK_COLORS[mark], "dash": "dot", "width": 1},
                        legendgroup="watermarks",
                        hoverinfo="name",
                    )
                )
        return share_chart(
            fig, record.meta.phases, "share of the KV pool (tiers: of the tier)", "fig-kv-usage", height_px=400
        )
