import pytest

from gates import GATES, GateError, Outcome, evaluate, get_gate
from gates.outputs.console import data_text
from record.errors import UnknownNameError
from tests.fixtures.records import CONFIG_DIGEST, RecordBuilder


def test_healthy_run_passes_every_gate(tmp_path):
    verdict = evaluate(RecordBuilder().healthy().build(tmp_path))
    assert [r.gate for r in verdict.results] == list(GATES)
    assert verdict.outcome is Outcome.PASS, [r for r in verdict.results if r.outcome is not Outcome.PASS]


def test_failed_gate_names_the_config_digest(tmp_path):
    record = RecordBuilder().healthy().event("oom", 40.0, num_blocks=3).build(tmp_path)
    verdict = evaluate(record)
    assert verdict.outcome is Outcome.FAIL
    assert CONFIG_DIGEST in verdict.result("no_oom").explanation
    assert CONFIG_DIGEST not in verdict.result("cancel_release").explanation


def test_not_measurable_gates_do_not_fail_the_run_unless_required(tmp_path):
    record = RecordBuilder().healthy().signals(tenant_samples=False).build(tmp_path)
    verdict = evaluate(record)
    assert verdict.outcome is Outcome.PASS and verdict.result("tenant_share").outcome is Outcome.NOT_MEASURABLE
    required = evaluate(record, require=["tenant_share"])
    assert required.outcome is Outcome.FAIL
    assert required.result("tenant_share").explanation.startswith("required but not measurable")


def test_only_runs_the_named_gates_plus_required_ones(tmp_path):
    record = RecordBuilder().healthy().build(tmp_path)
    verdict = evaluate(record, only=["no_oom"], require=["tenant_share"])
    assert [r.gate for r in verdict.results] == ["no_oom", "tenant_share"]


def test_unknown_gate_name_is_an_error(tmp_path):
    record = RecordBuilder().healthy().build(tmp_path)
    with pytest.raises(UnknownNameError, match="valid: approximate_answers, batch_progress"):
        evaluate(record, only=["no_such_gate"])
    with pytest.raises(UnknownNameError):
        evaluate(record, require=["no_such_gate"])


def test_nothing_measurable_is_not_a_pass(tmp_path):
    builder = RecordBuilder().signals(
        client_requests=False, engine_events=False, engine_samples=False, tenant_samples=False, gpu_memory=False
    )
    verdict = evaluate(builder.build(tmp_path))
    assert verdict.outcome is Outcome.NOT_MEASURABLE


def test_a_gate_that_crashes_is_a_harness_error(tmp_path, monkeypatch):
    record = RecordBuilder().healthy().build(tmp_path)
    gate = get_gate("no_oom")

    def boom(*_):
        raise KeyError("column")

    monkeypatch.setattr(gate, "evaluate", boom)
    with pytest.raises(GateError, match="no_oom"):
        evaluate(record)


def test_each_result_names_the_data_it_rested_on_or_what_it_needed(tmp_path):
    builder = RecordBuilder().healthy().signals(engine_events=False, gpu_memory=False)
    verdict = evaluate(builder.build(tmp_path))
    assert verdict.result("goodput").sources == ("client requests",)
    assert verdict.result("no_oom").sources == ("client requests",)
    cancel = verdict.result("cancel_release")
    assert cancel.sources == () and data_text(cancel) == "needs engine events or Prometheus metrics"
    assert data_text(verdict.result("memory_recovery")).startswith("engine usage samples")
