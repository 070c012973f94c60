"""Run the gates over one run record and collect the verdict.

Which gates run: all registered ones, or `only`; `require` names gates that must be measurable
(a required gate that is not measurable fails); `allow_partial` accepts a verdict with most
gates not measurable as a pass (gates/verdict.py). A record of a fleet has the gates that read
the target's telemetry judged on each replica and on the fleet (gates/fleet.py). Each failed
result names the config digest that ran, so a rollback can name what to go back from, and the
sources it rested on (gates/sources.py): the ones the gate named, else every source of the gate
the record had. A gate that raises is a harness error (`GateError`), never a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from gates.base import GateError, GateResult, Outcome
from gates.fleet import evaluate_gate
from gates.registry import GATES, get_gate
from gates.thresholds import Thresholds, load_thresholds
from gates.verdict import Verdict, read_verdict
from record.run_record import RunRecord


def evaluate(
    record: RunRecord,
    thresholds: Thresholds | None = None,
    *,
    only: Iterable[str] | None = None,
    require: Iterable[str] = (),
    allow_partial: bool = False,
) -> Verdict:
    """Run the gates (all, or `only`, plus `require`) over one record; unknown names raise."""
    thresholds = thresholds or load_thresholds()
    required = tuple(dict.fromkeys(get_gate(name).name for name in require))
    names = [get_gate(name).name for name in only] if only is not None else list(GATES)
    names = list(dict.fromkeys([*names, *required]))
    digest = record.meta.config_digest or "unknown (meta.config_digest is empty)"
    results = []
    for name in names:
        gate = get_gate(name)
        try:
            result = evaluate_gate(gate, record, thresholds.for_gate(name))
        except Exception as err:  # a crash is a harness error, whatever it was
            raise GateError(f"gate {name!r} could not read {record.dir}: {type(err).__name__}: {err}") from err
        if not result.sources:  # a gate that chose among its sources names the one it used
            result = replace(result, sources=tuple(s.label for s in gate.sources if s.is_in(record.meta)))
        results.append(_settle(result, name in required, digest))
    return Verdict(
        record.meta.run_id,
        record.meta.policy,
        record.meta.config_digest,
        thresholds.source,
        tuple(results),
        required,
        allow_partial,
    )


def stored_or_evaluated(record: RunRecord, thresholds_path: str | Path | None = None) -> Verdict:
    """The verdict a report shows: with explicit thresholds, the gates run now; otherwise the
    record's own verdict.json, or the gates run now with the defaults. Nothing is written."""
    stored = read_verdict(record.dir) if thresholds_path is None else None
    return stored or evaluate(record, load_thresholds(thresholds_path))


def _settle(result: GateResult, is_required: bool, digest: str) -> GateResult:
    if result.outcome is Outcome.NOT_MEASURABLE and is_required:
        result = result.with_outcome(Outcome.FAIL, f"required but not measurable: {result.explanation}")
    if result.outcome is Outcome.FAIL:
        result = result.with_outcome(Outcome.FAIL, f"{result.explanation} [config {digest}]")
    return result
