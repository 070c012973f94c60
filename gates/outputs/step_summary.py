"""The verdict as GitHub-flavoured markdown, appended to `$GITHUB_STEP_SUMMARY` in Actions.

Outside Actions (the variable unset) this output does nothing, so the same command runs
locally and in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

from gates.base import Outcome
from gates.verdict import Verdict

ICONS = {Outcome.PASS: "✅ pass", Outcome.FAIL: "❌ fail", Outcome.NOT_MEASURABLE: "⚠️ not measurable"}


class StepSummaryOutput:
    def emit(self, verdict: Verdict, run_dir: Path) -> Path | None:
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if not target:
            return None
        with open(target, "a", encoding="utf-8") as f:
            f.write(verdict_markdown(verdict))
        return Path(target)


def verdict_markdown(verdict: Verdict) -> str:
    lines = [
        f"### kvgate {ICONS[verdict.outcome]} — run `{verdict.run_id}`",
        "",
        f"{verdict.summary_line()}",
        "",
        "| gate | result | measured | threshold | explanation |",
        "|---|---|---:|---:|---|",
    ]
    for r in verdict.results:
        cells = [f"`{r.gate}`", ICONS[r.outcome], r.measured_text(), r.threshold_text(), r.explanation]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n\n"
