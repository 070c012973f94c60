"""The gate table: the verdict first, failed gates on top, evidence one click away."""

from __future__ import annotations

from gates import Outcome, Verdict
from gates.outputs.console import data_text
from record.run_record import RunRecord
from reports.page import badge, details, esc, note, table


class GateTableSection:
    name = "gates"
    title = "Gates"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        required = f"; required: {', '.join(verdict.required)}" if verdict.required else ""
        return (
            f'<div class="banner {verdict.outcome.value}">{esc(verdict.summary_line())}</div>'
            + gate_table(verdict)
            + note(f"thresholds: {verdict.thresholds_source}{required}")
        )


def gate_table(verdict: Verdict) -> str:
    rows = []
    for r in sorted(verdict.results, key=lambda r: r.outcome is not Outcome.FAIL):
        others = "".join(
            f"<div><code>{esc(m.metric)}</code> {esc(m.value_text())} ({esc(m.limit_text())})</div>"
            for m in r.measurements
            if m is not r.headline
        )
        evidence = details("evidence", r.evidence) if r.evidence else ""
        rows.append(
            [
                f"<code>{esc(r.gate)}</code>",
                badge(r.outcome),
                esc(r.measured_text()),
                esc(r.threshold_text()),
                esc(r.explanation) + others + evidence,
                esc(data_text(r)),
            ]
        )
    return table(["gate", "result", "measured", "threshold", "explanation", "data"], rows, numeric=(2, 3))
