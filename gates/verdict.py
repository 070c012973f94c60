"""The verdict: every gate's result for one run, and its JSON form (`verdict.json`).

The overall outcome is `fail` when any gate failed, `pass` when at least one gate passed and
none failed, and `not_measurable` when no gate could be measured at all — a run that proves
nothing must not read as a pass. A verdict with most of its gates not measurable (more than
`PARTIAL_ABOVE` of them) and none failed is *partial*: it is `not_measurable` too, unless the
user asked for a partial verdict (`allow_partial`, `--allow-partial`): two passing gates out of
eleven say little about a server, and must not read as a pass by default. A gate that judges a
kind of target the run's is not (`GateResult.applies`: the routing gates of a fleet, on a single
engine) is left out of that share: it could never be measured there, and must not turn a
single engine's verdict partial. The JSON keeps
measurements with their limits and directions, so a reader (a report, a comparison, a CI
summary) needs no gate code to show it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gates.base import GateResult, Measurement, Outcome, Unit, to_jsonable
from record.errors import KvgateError

VERDICT_SCHEMA_VERSION = 1
VERDICT_FILE = "verdict.json"
PARTIAL_ABOVE = 0.5
"""A verdict whose share of not-measurable gates is above this is partial."""


@dataclass(frozen=True)
class Verdict:
    run_id: str
    policy: str
    config_digest: str
    thresholds_source: str
    results: tuple[GateResult, ...]
    required: tuple[str, ...] = ()
    allow_partial: bool = False

    @property
    def outcome(self) -> Outcome:
        counts = self.counts()
        if counts[Outcome.FAIL]:
            return Outcome.FAIL
        if not counts[Outcome.PASS] or (self.is_partial and not self.allow_partial):
            return Outcome.NOT_MEASURABLE
        return Outcome.PASS

    @property
    def is_partial(self) -> bool:
        """Most gates that apply to the target were not measurable (module docstring)."""
        applying = [r for r in self.results if r.applies]
        unmeasured = sum(r.outcome is Outcome.NOT_MEASURABLE for r in applying)
        return unmeasured > PARTIAL_ABOVE * len(applying)

    def counts(self) -> Counter[Outcome]:
        counts = Counter({outcome: 0 for outcome in Outcome})
        counts.update(r.outcome for r in self.results)
        return counts

    def result(self, gate: str) -> GateResult | None:
        return next((r for r in self.results if r.gate == gate), None)

    def summary_line(self) -> str:
        c = self.counts()
        partial = ""
        if self.is_partial and c[Outcome.PASS] and not c[Outcome.FAIL]:
            partial = (
                " (a partial verdict, accepted with --allow-partial)"
                if self.allow_partial
                else " (most gates not measurable: not a pass; --allow-partial accepts a partial verdict)"
            )
        return (
            f"{self.outcome.value.upper()}: {c[Outcome.PASS]} passed, {c[Outcome.FAIL]} failed, "
            f"{c[Outcome.NOT_MEASURABLE]} not measurable{partial} — policy {self.policy or '?'}, "
            f"config {self.config_digest or 'digest unknown'}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": VERDICT_SCHEMA_VERSION,
            "run_id": self.run_id,
            "policy": self.policy,
            "config_digest": self.config_digest,
            "thresholds_source": self.thresholds_source,
            "outcome": self.outcome.value,
            "counts": {o.value: n for o, n in self.counts().items()},
            "required": list(self.required),
            "partial": self.is_partial,
            "allow_partial": self.allow_partial,
            "results": [_result_to_dict(r) for r in self.results],
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Verdict:
        if raw.get("schema_version", 0) > VERDICT_SCHEMA_VERSION:
            raise KvgateError(f"verdict schema {raw['schema_version']} is newer than this kvgate reads")
        return cls(
            raw["run_id"],
            raw["policy"],
            raw["config_digest"],
            raw["thresholds_source"],
            tuple(_result_from_dict(r) for r in raw["results"]),
            tuple(raw.get("required", ())),
            bool(raw.get("allow_partial", False)),
        )

    def write(self, run_dir: str | Path) -> Path:
        path = Path(run_dir) / VERDICT_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return path


def read_verdict(run_dir: str | Path) -> Verdict | None:
    """The verdict stored beside a run record, or None when the run was never gated."""
    path = Path(run_dir) / VERDICT_FILE
    return Verdict.from_dict(json.loads(path.read_text())) if path.exists() else None


def _result_to_dict(r: GateResult) -> dict[str, Any]:
    return {
        "gate": r.gate,
        "outcome": r.outcome.value,
        "explanation": r.explanation,
        "measured": r.measured_text(),
        "threshold": r.threshold_text(),
        "measurements": [
            {
                "metric": m.metric,
                "value": to_jsonable(m.value),
                "limit": to_jsonable(m.limit),
                "unit": m.unit.value,
                "is_max": m.is_max,
                "ok": m.ok,
            }
            for m in r.measurements
        ],
        "evidence": r.evidence,
        "sources": list(r.sources),
        "applies": r.applies,
    }


def _result_from_dict(raw: dict[str, Any]) -> GateResult:
    measurements = tuple(
        Measurement(m["metric"], float(m["value"]), float(m["limit"]), Unit(m["unit"]), m["is_max"])
        for m in raw["measurements"]
    )
    return GateResult(
        raw["gate"],
        Outcome(raw["outcome"]),
        raw["explanation"],
        measurements,
        raw["evidence"],
        tuple(raw.get("sources", ())),
        bool(raw.get("applies", True)),
    )
