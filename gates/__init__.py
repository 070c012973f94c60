"""kvgate gates: pure functions of a run record that say pass, fail or not measurable.

The public face:

    from gates import evaluate, load_thresholds, write_verdict
    verdict = evaluate(RunRecord.load(run_dir), load_thresholds("my_thresholds.toml"))
    write_verdict(run_dir, verdict)               # verdict.json + verdict.junit.xml
    verdict.outcome                               # Outcome.PASS | FAIL | NOT_MEASURABLE

A gate is a `Gate` (gates/base.py) registered once in `gates.registry.GATES`; verdict outputs
are `VerdictOutput`s in `gates.outputs.OUTPUTS`. docs/gates.md describes every gate.
"""

from gates import slo
from gates.base import Gate, GateError, GateResult, Measurement, Outcome, Unit
from gates.evaluate import evaluate, stored_or_evaluated
from gates.outputs import OUTPUTS, make_output, write_verdict
from gates.registry import GATES, get_gate
from gates.thresholds import DEFAULT_THRESHOLDS, Thresholds, load_thresholds
from gates.verdict import Verdict, read_verdict

__all__ = [
    "DEFAULT_THRESHOLDS",
    "GATES",
    "Gate",
    "GateError",
    "GateResult",
    "Measurement",
    "OUTPUTS",
    "Outcome",
    "Thresholds",
    "Unit",
    "Verdict",
    "evaluate",
    "get_gate",
    "load_thresholds",
    "make_output",
    "read_verdict",
    "slo",
    "stored_or_evaluated",
    "write_verdict",
]
