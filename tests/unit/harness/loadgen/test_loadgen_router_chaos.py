"""The router chaos schedule: every change it makes is one the router accepts, and undone."""

from __future__ import annotations

from harness.loadgen.router_chaos import RESTORE, SCHEDULE
from reference_engine.server.router_chaos import RouterChaosRequest


def test_every_step_is_one_change_the_router_accepts():
    for step in (*SCHEDULE, *(type(SCHEDULE[0])("restore", body) for body in RESTORE)):
        request = RouterChaosRequest.model_validate(step.body)
        assert len([v for v in request.model_dump().values() if v is not None]) == 1, step


def test_each_disturbance_is_undone_within_one_cycle():
    names = [s.name for s in SCHEDULE]
    assert names.index("keep_kv_events") > names.index("drop_kv_events")
    assert names.index("prompt_kv_events") > names.index("delay_kv_events")
    assert {k for body in RESTORE for k in body} == {"drop_kv_events", "kv_events_delay_s"}
