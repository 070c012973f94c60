"""Per-tenant live share against its cap; when the gate failed, the worst sample is marked.

The client's estimate (a target without tenants, or beside the engine's count) is drawn
dotted and named so: it is not the engine's count."""

from __future__ import annotations

import plotly.graph_objects as go

from gates import Outcome, Verdict
from gates.checks.tenant_share import shares_with_caps
from record.run_record import ESTIMATED_SOURCE, RunRecord
from reports.page import figure, note, shade_phases
from reports.series import downsample_max

MAX_POINTS_PER_TENANT = 600  # many tenants on one chart: fewer points each keeps it legible


class TenantShareSection:
    name = "tenant_share"
    title = "Tenant share vs cap"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        if record.tenant_samples.empty:
            return note("no per-tenant samples in this record (signals.tenant_samples is false)")
        ts = shares_with_caps(record)
        fig = go.Figure()
        estimated = ts["source"] == ESTIMATED_SOURCE
        for tenant, rows in ts.groupby("tenant", sort=True):
            for is_estimate, of_source in rows.groupby(estimated[rows.index], sort=True):
                of_source = downsample_max(of_source, "t_s", ["share"], max_points=MAX_POINTS_PER_TENANT)
                fig.add_trace(
                    go.Scatter(
                        x=of_source["t_s"],
                        y=of_source["share"],
                        name=f"{tenant} (client estimate)" if is_estimate else str(tenant),
                        mode="lines",
                        line={"dash": "dot"} if is_estimate else {},
                    )
                )
        caps = ts.dropna(subset=["cap"]).groupby("cap")["tenant"].unique()
        for cap, tenants in caps.items():
            who = ", ".join(sorted(tenants)) if len(caps) > 1 else "all tenants"
            fig.add_hline(
                y=cap,
                line_dash="dash",
                line_color="#cf222e",
                line_width=1.5,
                annotation_text=f"cap {cap:.0%} ({who})",
                annotation_position="top left",
                annotation_font_size=10,
                annotation_font_color="#cf222e",
            )
        result = verdict.result("tenant_share")
        if result is not None and result.outcome is Outcome.FAIL:
            worst = result.evidence["worst_sample"]
            fig.add_trace(
                go.Scatter(
                    x=[worst["t_s"]],
                    y=[worst["share"]],
                    mode="markers",
                    name="worst sample",
                    marker={"symbol": "x", "size": 12, "color": "#cf222e"},
                )
            )
        shade_phases(fig, record.meta.phases)
        fig.update_layout(
            xaxis_title="time (s)",
            yaxis_title="live share of the pool",
            yaxis_tickformat=".0%",
            yaxis_rangemode="tozero",
        )
        return figure(fig, "fig-tenant-share")
