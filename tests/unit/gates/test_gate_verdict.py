import json
import math

from gates import GATES, Outcome, Verdict, evaluate, read_verdict
from gates.base import GateResult, Measurement, Unit, format_value
from tests.fixtures.records import RecordBuilder


def _failing_verdict(tmp_path) -> Verdict:
    builder = RecordBuilder().healthy().routed_fleet().event("cancel_received", 60.0, request_id="stuck")
    builder.event("admitted", 59.0, request_id="stuck").signals(tenant_samples=False)
    return evaluate(builder.build(tmp_path))


def test_verdict_json_round_trips_with_infinite_values(tmp_path):
    verdict = _failing_verdict(tmp_path)
    assert math.isinf(verdict.result("cancel_release").headline.value)
    path = verdict.write(tmp_path)
    raw = json.loads(path.read_text())  # strict JSON: no Infinity literal
    assert raw["outcome"] == "fail" and raw["counts"] == {"pass": len(GATES) - 2, "fail": 1, "not_measurable": 1}
    again = read_verdict(tmp_path)
    assert again == verdict and again.to_dict() == verdict.to_dict()


def test_read_verdict_is_none_for_an_ungated_run(tmp_path):
    assert read_verdict(tmp_path) is None


def test_headline_is_the_first_failing_measurement():
    ok = Measurement("a", 1, 2, Unit.COUNT)
    bad = Measurement("b", 0.5, 0.9, Unit.FRACTION, is_max=False)
    result = GateResult.judged("g", [ok, bad], "x")
    assert result.outcome is Outcome.FAIL and result.headline is bad
    assert (result.measured_text(), result.threshold_text()) == ("50.0%", "≥ 90.0%")


def test_values_read_as_people_write_them():
    assert format_value(0.8123, Unit.SECONDS) == "0.812 s"
    assert format_value(812.4, Unit.MILLISECONDS) == "812 ms"
    assert format_value(math.inf, Unit.SECONDS) == "never"
    assert format_value(4.04, Unit.RATIO) == "4.0×"
    assert format_value(0.0005, Unit.FRACTION_PER_S) == "0.05%/s"


def test_nan_measurement_is_never_ok():
    assert not Measurement("a", math.nan, 1, Unit.COUNT).ok


def _verdict(outcomes: list[Outcome], allow_partial: bool = False) -> Verdict:
    results = tuple(GateResult(f"g{i}", o, "x") for i, o in enumerate(outcomes))
    return Verdict("run", "external", "", "defaults", results, allow_partial=allow_partial)


def test_a_verdict_with_most_gates_not_measurable_is_not_a_pass_unless_partial_is_allowed():
    nm, ok = Outcome.NOT_MEASURABLE, Outcome.PASS
    partial = [ok, ok, nm, nm, nm]
    assert (_verdict(partial).outcome, _verdict(partial).is_partial) == (nm, True)
    assert "--allow-partial" in _verdict(partial).summary_line()
    assert _verdict(partial, allow_partial=True).outcome is ok
    assert _verdict([ok, ok, nm, nm]).outcome is ok  # half is not most
    assert _verdict([Outcome.FAIL, nm, nm, nm]).outcome is Outcome.FAIL


def test_allow_partial_round_trips_through_verdict_json(tmp_path):
    verdict = _verdict([Outcome.PASS, Outcome.NOT_MEASURABLE, Outcome.NOT_MEASURABLE], allow_partial=True)
    verdict.write(tmp_path)
    again = read_verdict(tmp_path)
    assert again == verdict and again.to_dict()["partial"] is True and again.outcome is Outcome.PASS
