"""requests.csv rows rebuilt from engine events, as a client would have recorded them."""

from harness.replay.client_view import ClientView
from record.errors import CapacityError
from record.events import EventKind
from reference_engine.config import TrafficClass
from reference_engine.core.event_log import EventLog
from reference_engine.request import Request


def request(rid: str, arrival_s: float = 1.0) -> Request:
    return Request(
        request_id=rid,
        tenant="acme",
        traffic_class=TrafficClass.INTERACTIVE,
        num_prompt_tokens=100,
        max_new_tokens=8,
        arrival_s=arrival_s,
        requested_max_new_tokens=8,
    )


def test_a_finished_request_gets_its_times_from_first_token_and_finished_events():
    view, log = ClientView("replay:test"), EventLog()
    view.sent(request("r1", arrival_s=1.2), 1.0)  # the engine saw it at the step boundary after 1.0
    log.emit(1.5, EventKind.FIRST_TOKEN, request_id="r1")
    assert view.observe(log.since(0).events) == []  # not finished yet
    log.emit(2.0, EventKind.FINISHED, request_id="r1", num_tokens=8, reason="stop")
    [row] = view.observe(log.since(1).events)
    assert (row["sent_s"], row["first_token_s"], row["done_s"]) == (1.0, 1.5, 2.0)
    assert (row["ttft_s"], row["e2e_s"], row["status"], row["http_status"]) == (0.5, 1.0, "ok", 200)
    assert (row["completion_tokens"], row["finish_reason"], row["scenario"]) == (8, "stop", "replay:test")
    assert view.num_open == 0


def test_leaving_the_queue_and_oom_are_errors_with_their_codes():
    view, log = ClientView("replay:test"), EventLog()
    view.sent(request("late"), 1.0)
    view.sent(request("oom"), 1.0)
    log.emit(9.0, EventKind.REJECTED, request_id="late", reason="queue_deadline")
    log.emit(9.0, EventKind.FINISHED, request_id="late", num_tokens=0, reason="rejected")
    log.emit(9.5, EventKind.FINISHED, request_id="oom", num_tokens=3, reason="oom")
    late, oom = view.observe(log.since(0).events)
    assert (late["status"], late["http_status"], late["error_code"]) == ("error", 429, "queue_deadline")
    assert (oom["status"], oom["http_status"], oom["error_code"]) == ("error", 503, "oom")


def test_a_refusal_ends_at_the_step_boundary_with_the_errors_status_and_code():
    row = ClientView("replay:test").refused(
        "r9", "acme", "interactive", 3.0, 3.25, 100, 8, None, CapacityError("over quota", code="tenant_quota")
    )
    assert (row["done_s"], row["e2e_s"], row["status"], row["http_status"], row["error_code"]) == (
        3.25,
        0.25,
        "error",
        429,
        "tenant_quota",
    )
    assert "first_token_s" not in row
