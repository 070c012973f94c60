"""Router pieces that need no processes: routing, relaying, snapshot and metrics aggregation."""

import asyncio
import json

import httpx
import pytest
from starlette.requests import Request

from record.errors import AuthError, InvalidRequestError
from record.events import EventKind
from reference_engine.config import TenantConfig
from reference_engine.routing import RouteRequest
from reference_engine.server.merged_events import MERGED_COLUMNS, MergedEventLog, WorkerEventPuller
from reference_engine.server.router import ProxyResponse, Router
from reference_engine.server.router_app import merge_worker_metrics
from reference_engine.server.snapshots import aggregate_snapshots
from reference_engine.server.state import bearer_key, check_admin_key, session_rebuildable
from reference_engine.server.supervisor import WorkerState, exit_cause
from tests.unit.server.server_support import ACME, chat, server_config, serving


def ready_router(num_workers: int = 2) -> Router:
    router = Router(server_config(), num_workers)
    for slot in router.slots:
        slot.state, slot.incarnation = WorkerState.READY, 1
    return router


def test_least_loaded_worker_wins_and_ties_rotate():
    router = ready_router()
    router.ledger.reserve("big", 0, 100, "acme")
    assert [router.pick(set(), None)[0].worker for _ in range(3)] == [1, 1, 1]
    router.ledger.release("big", "finished")
    assert {router.pick(set(), None)[0].worker for _ in range(4)} == {0, 1}
    assert router.pick({0, 1}, None)[:2] == (None, False)


def test_a_session_sticks_to_its_worker_until_that_worker_is_replaced():
    router = ready_router()
    router.remember_session("acme/s", router.slots[1])
    router.ledger.reserve("x", 1, 1000, "acme")  # busy, but it holds the session's KV
    assert router.pick(set(), "acme/s")[:2] == (router.slots[1], False)
    router.slots[1].incarnation += 1  # killed and restarted: the KV is gone
    assert router.pick(set(), "acme/s")[:2] == (router.slots[0], True)
    assert router.pick(set(), "acme/s")[:2] == (router.slots[0], False)  # a new session now


def test_block_estimate_matches_admission_and_is_zero_for_bad_bodies():
    router = ready_router()
    assert router.estimate_blocks("text", {"model": "m", "prompt": list(range(100)), "max_tokens": 60}) == 11
    assert router.estimate_blocks("chat", {"model": "m"}) == 0 and router.estimate_blocks("chat", None) == 0


def snapshot(live: int, level: str, waiting: int, frag: float) -> dict:
    return {
        "num_blocks": 100,
        "live_blocks": live,
        "retained_blocks": 1,
        "pinned_blocks": 1,
        "cached_blocks": 2,
        "free_blocks": 100 - live - 2,
        "pending_blocks": 0,
        "num_running": 1,
        "num_waiting": waiting,
        "num_swapped": 0,
        "num_prefilling": 0,
        "public_live_blocks": 1,
        "host_used_bytes": 0.0,
        "active_blocks": live - 1,
        "num_open_streams": 1,
        "waiting_by_class": {"batch": waiting},
        "tenant_live_blocks": {"acme": live - 1},
        "tier_used_blocks": {"host": live},
        "oldest_wait_s_by_class": {"batch": float(waiting)},
        "fragmentation": frag,
        "level": level,
    }


def test_snapshots_aggregate_as_one_larger_pool():
    agg = aggregate_snapshots({0: snapshot(10, "normal", 1, 0.5), 1: snapshot(30, "evict", 3, 0.1)})
    assert agg["num_blocks"] == 200 and agg["live_blocks"] == 40 and agg["usage"] == 0.2
    assert agg["waiting_by_class"] == {"batch": 4} and agg["oldest_wait_s_by_class"] == {"batch": 3.0}
    assert agg["tenant_live_blocks"] == {"acme": 38} and agg["level"] == "evict"
    assert agg["tier_used_blocks"] == {"host": 40}  # the workers' tiers, one larger tier
    assert agg["fragmentation"] == pytest.approx((10 * 0.5 + 30 * 0.1) / 40)


def test_worker_metrics_merge_into_one_family_per_name_with_a_worker_label():
    text = (
        "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 3.0\n'
    )
    [family] = merge_worker_metrics({0: text, 1: text.replace("3.0", "5.0")})
    assert [(s.labels["worker"], s.value) for s in family.samples] == [("0", 3.0), ("1", 5.0)]


def test_exit_causes_name_the_signal():
    assert exit_cause(-9) == "killed by SIGKILL" and exit_cause(3) == "exit code 3"


@pytest.mark.parametrize(
    "header, key", [("Bearer k", "k"), ("bearer  k ", "k"), ("Basic k", None), (None, None), ("Bearer", None)]
)
def test_bearer_keys(header, key):
    assert bearer_key(header) == key


@pytest.mark.anyio
async def test_worker_events_are_pulled_by_cursor_retimed_and_tagged():
    async with serving(server_config()) as (client, app):
        await client.post("/v1/chat/completions", json=chat(max_tokens=2), headers=ACME)
        offset = app.state.kvgate.loop.engine_clock_offset_unix
        merged = MergedEventLog()
        puller = WorkerEventPuller(merged, offset - 10.0, "sk-kvgate-admin", num_workers=2)
        await puller.pull(client, 1, incarnation=1, timeout=httpx.Timeout(5))
        await puller.pull(client, 1, incarnation=1, timeout=httpx.Timeout(5))  # nothing new: nothing twice
        rows, _, _ = merged.page(0, 1000)
        engine = list(app.state.kvgate.core.events)
        assert len(rows) == len(engine) and {r[-1] for r in rows} == {1}
        assert rows[0][1] == pytest.approx(engine[0].t_s + 10.0)
        assert [r[2] for r in rows] == [e.kind.value for e in engine]
        await puller.pull(
            client, 1, incarnation=2, timeout=httpx.Timeout(5)
        )  # a restarted worker: its log starts again
        assert len(merged.page(0, 1000)[0]) == 2 * len(engine)
        assert EventKind(rows[-1][2]) is EventKind.FINISHED


async def relay(router: Router, body: dict, streaming: bool = False) -> list[dict]:
    """Run one ProxyResponse against the router's (mock) workers; the ASGI messages it sent."""
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.Event().wait()  # the client never hangs up
        return {}

    async def send(message: dict) -> None:
        sent.append(message)

    response = ProxyResponse(
        router,
        path="/v1/completions",
        body=json.dumps(body).encode(),
        headers={},
        request_id="r-1",
        tenant="acme",
        route=RouteRequest(7),
        streaming=streaming,
        session_key=None,
        rebuildable=True,
    )
    await response({"type": "http"}, receive, send)
    return sent


def mock_worker(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://worker")


@pytest.mark.anyio
async def test_an_unreachable_worker_is_retried_elsewhere_without_two_reservations():
    router = ready_router()
    held: list[int] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        held.append(len(router.ledger))
        raise httpx.ConnectError("connection refused", request=request)

    def answer(request: httpx.Request) -> httpx.Response:
        held.append(len(router.ledger))
        return httpx.Response(200, json={"id": "r-1"})

    router._clients = [mock_worker(refuse), mock_worker(answer)]  # what _on_ready sets up for live workers
    router.ledger.reserve("other", 1, 100, "acme")  # worker 0 is the least loaded: tried first
    sent = await relay(router, {"model": "m", "prompt": "x"})
    assert sent[0]["status"] == 200 and held == [2, 2]  # "other" + this request, never a third
    rows, _, _ = router.events.page(0, 10)
    events = [dict(zip(MERGED_COLUMNS, row)) for row in rows]
    assert [(e["kind"], e["request_id"], e["reason"], e["worker"]) for e in events] == [
        ("routed", "r-1", "policy", 0),
        ("reservation_released", "r-1", "worker_lost", 0),
        ("routed", "r-1", "policy", 1),
        ("reservation_released", "r-1", "finished", 1),
    ]
    assert {e["mode"] for e in events if e["kind"] == "routed"} == {"least_loaded"}
    assert router.num_retries == 1 and router.ledger.get("r-1") is None


@pytest.mark.anyio
async def test_a_stream_cut_by_a_lost_worker_ends_with_a_worker_lost_event():
    router = ready_router(1)

    async def cut_short():
        yield b'data: {"id":"r-1"}\n\n'
        raise httpx.ReadError("connection reset by peer")

    router._clients = [mock_worker(lambda request: httpx.Response(200, content=cut_short()))]
    sent = await relay(router, {"model": "m", "prompt": "x", "stream": True}, streaming=True)
    tail = sent[-1]["body"].decode()
    assert sent[0]["status"] == 200 and '"code":"worker_lost"' in tail and tail.endswith("data: [DONE]\n\n")
    assert router.num_worker_lost_requests == 1 and len(router.ledger) == 0


async def proxied(router: Router, headers: dict[str, str], body: dict) -> list[dict]:
    """Take one request in through `Router.proxy` (as the router app does) and relay it."""
    raw = json.dumps(body).encode()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/completions",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }

    async def receive_body() -> dict:
        return {"type": "http.request", "body": raw, "more_body": False}

    response = await router.proxy(Request(scope, receive_body), "text")
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.Event().wait()  # the client never hangs up
        return {}

    async def send(message: dict) -> None:
        sent.append(message)

    await response({"type": "http"}, receive, send)
    return sent


@pytest.mark.anyio
@pytest.mark.parametrize(
    "tenant_rebuildable, header, status",
    [
        (False, {}, 410),  # the tenant's rebuildable_sessions = false, as a worker applies it
        (True, {"X-Session-Rebuildable": "false"}, 410),
        (True, {}, 200),
    ],
)
async def test_a_session_whose_worker_died_is_rebuilt_only_where_worker_would_rebuild_it(
    tenant_rebuildable, header, status
):
    router = Router(server_config(tenants__acme__rebuildable_sessions=tenant_rebuildable), 2)
    for slot in router.slots:
        slot.state, slot.incarnation = WorkerState.READY, 1
    router._clients = [mock_worker(lambda request: httpx.Response(200, json={"id": "r-1"})) for _ in range(2)]
    router.remember_session("acme/s", router.slots[1])
    router.slots[1].incarnation += 1  # killed and restarted: the session's KV is gone
    sent = await proxied(router, {**ACME, "X-Session-Id": "s", **header}, {"model": "m", "prompt": "x"})
    assert sent[0]["status"] == status
    if status == 410:
        assert json.loads(sent[1]["body"])["error"]["code"] == "context_expired" and len(router.ledger) == 0
    else:
        assert (b"x-kvgate-session-rebuilt", b"true") in sent[0]["headers"]


@pytest.mark.anyio
async def test_router_checks_keys_and_the_rebuildable_header_as_a_worker_does():
    router = ready_router()
    with pytest.raises(AuthError, match="unknown API key"):
        await proxied(router, {"Authorization": "Bearer sk-nobody"}, {"model": "m", "prompt": "x"})
    with pytest.raises(InvalidRequestError, match="X-Session-Rebuildable"):
        await proxied(router, {**ACME, "X-Session-Rebuildable": "maybe"}, {"model": "m", "prompt": "x"})
    assert router.authenticate("Bearer sk-acme")[0] == "acme"
    open_router = Router(server_config(tenants={}), 1)
    assert open_router.authenticate(None) == (None, TenantConfig(api_keys=["*"]))


@pytest.mark.parametrize(
    "header, tenant_ok, expected",
    [
        (None, True, True),
        ("TRUE", True, True),
        ("yes", False, False),
        (None, False, False),
        ("0", True, False),
        ("no", True, False),
    ],
)
def test_session_rebuildable_needs_the_client_and_the_tenant(header, tenant_ok, expected):
    assert session_rebuildable(header, TenantConfig(api_keys=["k"], rebuildable_sessions=tenant_ok)) is expected


def test_the_admin_key_check_is_shared():
    check_admin_key("Bearer sk-admin", "sk-admin")
    for header in (None, "Bearer sk-admin2", "Basic sk-admin", "Bearer "):
        with pytest.raises(AuthError):
            check_admin_key(header, "sk-admin")
