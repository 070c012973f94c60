"""Replicas side by side: behind a gateway, each replica's figures and verdicts next to the fleet's.

A table with one column per replica and one for the fleet (peak KV usage under load, prefix hits
over the run and their ratio, preemptions, restarts, cached blocks its KV events removed, samples
its metrics missed, and each per-replica gate's outcome), the run's prefix hits beside the
workload's infinite-cache bound, then each replica's KV usage over time on one chart: a gap in
a line is a tick its metrics did not answer, a cross a restart seen on it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from gates import Outcome, Verdict
from gates.fleet import PER_REPLICA
from record.fleet import FLEET, replica_names, replica_summary
from record.run_record import MISSING_SOURCE, RunRecord
from reports.page import badge, esc, note, share_chart, table
from reports.prefix_reuse import reuse_line
from reports.series import downsample_max

SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("peak_usage", "peak KV usage under load"),
    ("prefix_hit_tokens", "prefix-cache hit tokens (the run's)"),
    ("prefix_hit_ratio", "prefix hit ratio of the load"),
    ("preemptions", "preemptions (the run's)"),
    ("restarts", "restarts seen"),
    ("cached_blocks_removed", "cached blocks removed (KV events)"),
    ("num_samples_missed", "samples its metrics missed"),
)
"""The figures of `record.fleet.replica_summary` a reader compares, as labelled here and on the console."""
PERCENT = frozenset({"peak_usage", "prefix_hit_ratio"})


class ReplicasSection:
    name = "replicas"
    title = "Replicas side by side"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        names = replica_names(record)
        if not names:
            return note("one target, no replicas behind it (kvgate run --target GATEWAY --replica URL reads a fleet)")
        summary = replica_summary(record).set_index("replica")
        columns = [*names, FLEET]
        rows = [[esc(label), *(summary_text(summary.at[c, key], key) for c in columns)] for key, label in SUMMARY_ROWS]
        rows += [_gate_row(verdict, gate, names) for gate in sorted(PER_REPLICA)]
        body = table(["", *columns], rows, numeric=tuple(range(1, len(columns) + 1)))
        line = reuse_line(record)
        return body + (note(line) if line else "") + _usage_chart(record, names)


def summary_text(value: Any, key: str) -> str:
    """One figure of the summary as a reader reads it: a share in %, a count, or — (not known)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if key in PERCENT:
        return f"{float(value):.1%}"
    return f"{float(value):,.0f}"


def _gate_row(verdict: Verdict, gate: str, names: list[str]) -> list[str]:
    result = verdict.result(gate)
    if result is None:
        return [f"<code>{esc(gate)}</code>", *("—" for _ in names), "—"]
    parts = result.evidence.get("replicas", {})
    cells = [badge(Outcome(parts[n]["outcome"])) if n in parts else "—" for n in names]
    fleet = result.evidence.get("fleet_outcome")
    return [f"<code>{esc(gate)}</code>", *cells, badge(Outcome(fleet)) if fleet else "—"]


def _usage_chart(record: RunRecord, names: list[str]) -> str:
    samples = record.replica_samples
    if samples.empty:
        return note("no replica samples in this record")
    fig = go.Figure()
    restarts = record.events[record.events["kind"] == "engine_restart"]
    for name in names:
        rows = samples[samples["replica"] == name].sort_values("t_s", kind="stable")
        usage = rows["usage"].where(rows["source"] != MISSING_SOURCE)  # a missed tick breaks the line
        frame = downsample_max(pd.DataFrame({"t_s": rows["t_s"], "usage": usage}), "t_s", ["usage"])
        fig.add_trace(go.Scatter(x=frame["t_s"], y=frame["usage"], name=name, mode="lines", connectgaps=False))
        seen = restarts[restarts["replica"] == name]
        if len(seen):
            fig.add_trace(
                go.Scatter(
                    x=seen["t_s"],
                    y=[1.0] * len(seen),
                    name=f"{name} restart",
                    mode="markers",
                    marker={"symbol": "x", "size": 10},
                )
            )
    fleet = record.samples.sort_values("t_s", kind="stable")
    if fleet["usage"].notna().any():
        frame = downsample_max(fleet, "t_s", ["usage"])
        fig.add_trace(
            go.Scatter(x=frame["t_s"], y=frame["usage"], name=FLEET, mode="lines", line={"dash": "dash", "width": 1})
        )
    return share_chart(fig, record.meta.phases, "KV usage of each replica's pool", "fig-replica-usage")
