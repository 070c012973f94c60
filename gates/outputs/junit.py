"""JUnit XML (`verdict.junit.xml`): one testcase per gate, so CI test viewers show gates.

A failed gate is a `<failure>`, a not-measurable one a `<skipped>` (reported, not passed); the
message is the gate's one-line explanation, the body its measurements and evidence. The run's
policy, config digest and overall outcome are suite properties.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from gates.base import GateResult, Outcome
from gates.verdict import Verdict

JUNIT_FILE = "verdict.junit.xml"


class JunitOutput:
    def emit(self, verdict: Verdict, run_dir: Path) -> Path:
        path = run_dir / JUNIT_FILE
        ET.ElementTree(junit_element(verdict)).write(path, encoding="utf-8", xml_declaration=True)
        return path


def junit_element(verdict: Verdict) -> ET.Element:
    counts = verdict.counts()
    suites = ET.Element(
        "testsuites",
        name="kvgate",
        tests=str(len(verdict.results)),
        failures=str(counts[Outcome.FAIL]),
        skipped=str(counts[Outcome.NOT_MEASURABLE]),
        errors="0",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"kvgate.{verdict.run_id}",
        tests=str(len(verdict.results)),
        failures=str(counts[Outcome.FAIL]),
        skipped=str(counts[Outcome.NOT_MEASURABLE]),
        errors="0",
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("run_id", verdict.run_id),
        ("policy", verdict.policy),
        ("config_digest", verdict.config_digest),
        ("outcome", verdict.outcome.value),
        ("thresholds", verdict.thresholds_source),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    for result in verdict.results:
        suite.append(_testcase(result))
    return suites


def _testcase(result: GateResult) -> ET.Element:
    case = ET.Element("testcase", classname="kvgate.gates", name=result.gate)
    if result.outcome is Outcome.FAIL:
        failure = ET.SubElement(case, "failure", message=result.explanation, type="GateViolation")
        failure.text = _details(result)
    elif result.outcome is Outcome.NOT_MEASURABLE:
        ET.SubElement(case, "skipped", message=f"not measurable: {result.explanation}")
    else:
        ET.SubElement(case, "system-out").text = _details(result)
    return case


def _details(result: GateResult) -> str:
    lines = [result.explanation]
    lines += [
        f"{m.metric}: {m.value_text()} ({m.limit_text()}){'' if m.ok else '  <-- violated'}"
        for m in result.measurements
    ]
    lines.append("evidence: " + json.dumps(result.evidence, indent=2))
    return "\n".join(lines)
