"""Pressure reached: how far up the watermark ladder the run went, when, how often and for how
long, and what the engine did about it. It follows the gate table because a verdict earned
below the evict and preempt rungs says nothing about eviction or preemption; a run that never
got there says so in a red banner."""

from __future__ import annotations

from gates import Verdict
from record.run_record import RungReached, RunMeta, RunRecord
from reports.page import esc, note, table
from reports.pressure import DECISION_LABELS, NOT_RECORDED, missing_rungs_warning, pressure_line

SOURCES = {
    "engine": "levels from the engine's watermark events (every level change, at the end of the step that caused it)",
    "samples": "levels from the usage samples against the watermarks (at the sample interval: a short visit "
    "between two samples is missed)",
}


class PressureSection:
    name = "pressure"
    title = "Pressure reached"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        meta, pressure = record.meta, record.meta.pressure
        if pressure is None:
            return note(f"{NOT_RECORDED}: run it again, or read the usage chart below against the watermarks")
        warning = missing_rungs_warning(pressure)
        banner = (
            f'<div class="banner fail">{esc(warning)}</div>'
            if warning
            else f'<div class="banner pass">{esc(pressure_line(pressure))}</div>'
        )
        if pressure.source == "none":
            return banner
        rungs = [
            [
                f"<code>{esc(r.rung)}</code>",
                f"{r.usage:.0%}",
                "yes" if r.first_s is not None else "<b>no</b>",
                "—" if r.first_s is None else esc(f"{r.first_s:.1f} s ({_phase_at(meta, r.first_s)})"),
                str(r.entries),
                _held(r, meta.duration_s),
            ]
            for r in pressure.rungs
        ]
        decisions = [
            [esc(DECISION_LABELS.get(key, key)), f"{count:,}"]
            for key, count in sorted(pressure.decisions.items(), key=lambda kv: _order(kv[0]))
        ]
        return (
            banner
            + table(["rung", "at live usage", "reached", "first", "times entered", "held"], rungs, numeric=(1, 4, 5))
            + note(
                SOURCES.get(pressure.source, pressure.source)
                + "; held: the total time at or above the rung (one still held at the end counts to the "
                "end of the run)"
            )
            + "<h3>The engine's answers to pressure</h3>"
            + table(["decision", "count"], decisions, numeric=(1,))
        )


def _held(rung: RungReached, duration_s: float) -> str:
    if rung.first_s is None:
        return "—"
    return f"{rung.held_s:.1f} s" + (f" ({rung.held_s / duration_s:.0%} of the run)" if duration_s else "")


def _order(key: str) -> int:
    labels = list(DECISION_LABELS)
    return labels.index(key) if key in labels else len(labels)


def _phase_at(meta: RunMeta, t_s: float) -> str:
    return next((p.name for p in meta.phases if p.start_s <= t_s < p.end_s), "outside the phases")
