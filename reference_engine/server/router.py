"""The router of multi-worker mode: routing policies, the reservation ledger, worker loss.

`Router` sends each completion request to a ready worker chosen by its routing policy
(`server.routing`, reference_engine/routing/: least_loaded, the default, takes the worker with
the fewest reserved blocks; round_robin each in turn; prefix_aware weighs the prompt blocks a
worker already caches, known from the workers' KV cache events (fleet_kv_events.py), against
its load), except that a session stays on the worker that holds its KV. Every decision is a
`routed` event: worker, policy, and the prefix blocks it expected to find there. Before
forwarding it reserves the request's worst-case blocks on that worker in its
`ReservationLedger`; the reservation is released when the response ends.

When the supervisor reports a worker dead (kill -9), the router records `worker_died`,
releases every reservation on it (`reservation_released`, reason worker_lost; unless
`server.release_reservations_on_worker_loss` is off, a broken router built on purpose for the
no-orphans gate: see reservations.py), and the streams
it was relaying end with a `worker_lost` SSE error event (503 if no byte was sent yet). A
request that could not reach its worker at all (connection refused) is retried on another
one: its reservation is released first, so it never holds two. A session whose worker died is
re-prefilled elsewhere and says so (`x-kvgate-session-rebuilt: true`), or answers 410
`context_expired` when it is not rebuildable (the client's `X-Session-Rebuildable: false` or its
tenant's `rebuildable_sessions = false`: `state.session_rebuildable`, as a worker decides).

A worker can also hang without dying (SIGSTOP, a deadlock): the router probes every ready
worker's `/health` every `server.worker_probe_interval_s`, and a worker whose probe gets no
answer within `server.worker_hang_timeout_s` is killed by the supervisor and then handled as any
death. So a hung worker is found within interval + timeout; its streams, tracked per worker,
end with `worker_lost` at its death (even those it never accepted, which would otherwise wait in
the slot's listening socket for its next incarnation). The router's own calls to workers (admin
fan-out, event pulls) are bounded by the same timeout and skip workers that are not ready, so
its endpoints never wait on a worker longer than that, and never on one known hung.

`ProxyResponse` relays one request: bytes pass through untouched, so the worker's SSE chunks,
ids and headers reach the client as they are; a client disconnect closes the upstream
connection, which makes the worker abort the request (its own cancel-on-disconnect).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import secrets
import time
from collections import OrderedDict
from typing import NamedTuple

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from record.errors import ContextExpiredError, RequestError, WorkerLostError
from record.events import EventKind
from reference_engine.clock import MonotonicClock
from reference_engine.config import EngineConfig, RoutingPolicyName, TenantConfig
from reference_engine.config.engine_config import KvEventsPublisher
from reference_engine.core.tenants import TenantKeys
from reference_engine.memory import MemoryPlan
from reference_engine.routing import PrefixIndex, RouteRequest, RoutingContext, WorkerLoad, make_routing_policy
from reference_engine.routing import prompt_keys as content_keys
from reference_engine.server.admin import KV_SEQ_HEADER
from reference_engine.server.errors import error_response
from reference_engine.server.fleet_kv_events import FleetKvEvents
from reference_engine.server.merged_events import MergedEventLog, WorkerEventPuller
from reference_engine.server.openai_format import DONE, error_event
from reference_engine.server.protocol import ChatCompletionRequest, CompletionRequest
from reference_engine.server.reservations import ReservationLedger
from reference_engine.server.state import FORWARDED_ID_HEADER, ROUTER_KEY_HEADER, bearer_key, session_rebuildable
from reference_engine.server.supervisor import Supervisor, WorkerSlot, WorkerState
from reference_engine.tokenizer import WordTokenizer

log = logging.getLogger("kvgate.router")

_FORWARDED = ("authorization", "content-type", "x-session-id", "x-session-rebuildable", "x-request-id")
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"date", b"server"})
_PULL_INTERVAL_S = 0.2
_MAX_SESSIONS = 100_000


_NO_PROMPT = RouteRequest(0)  # a request the policy knows nothing of


class Pick(NamedTuple):
    """A routing decision: the worker (None: none is ready), whether a session moved off a lost
    worker, the prefix blocks the policy expected there, and why (`policy` or `session`)."""

    slot: WorkerSlot | None
    moved: bool
    matched_blocks: int = 0
    reason: str = "policy"


class Router:
    def __init__(self, config: EngineConfig, num_workers: int, log_level: str = "info") -> None:
        assert config.server.admin_key is not None, "serve() gives the router its admin key (it names worker requests)"
        self.config = config
        self.admin_key: str = config.server.admin_key
        self.clock = MonotonicClock()
        self.engine_clock_offset_unix = time.time() - self.clock.now()
        self.events = MergedEventLog()
        self.ledger = ReservationLedger(
            self.clock,
            self.events,
            num_workers,
            release_on_worker_loss=config.server.release_reservations_on_worker_loss,
        )
        self.supervisor = Supervisor(
            config, num_workers, on_ready=self._on_ready, on_death=self._on_death, log_level=log_level
        )
        self.puller = WorkerEventPuller(
            self.events, self.engine_clock_offset_unix, config.server.admin_key, num_workers
        )
        self.memory = MemoryPlan.from_config(config)
        self.index = PrefixIndex()
        self.policy = make_routing_policy(
            config.server.routing,
            RoutingContext(num_workers, self.index, config.server.kv_overlap_score_weight),
        )
        self.kv_events = self._kv_events(config)
        self.tokenizer = WordTokenizer()
        self.model_name = config.server.served_model_name or config.model.name
        self.started_unix = time.time()
        self.num_worker_lost_requests = 0
        self.num_retries = 0
        self._tenants = TenantKeys(config, lambda name, tc: (name, tc))  # the workers' key check
        self._clients: list[httpx.AsyncClient | None] = [None] * num_workers
        self._relays: list[set[ProxyResponse]] = [set() for _ in range(num_workers)]  # in flight, per worker
        self.call_timeout = httpx.Timeout(config.server.worker_hang_timeout_s)
        self._sessions: OrderedDict[str, tuple[int, int]] = OrderedDict()  # session -> (worker, incarnation)
        self._nonce = secrets.token_hex(3)
        self._ids = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []

    def _kv_events(self, config: EngineConfig) -> FleetKvEvents | None:
        """The subscriptions a prefix-aware router reads its index from (None: it reads none)."""
        events = config.kv_events
        if not self.policy.reads_prefixes:
            return None
        if not events.enable_kv_cache_events or events.publisher is not KvEventsPublisher.ZMQ:
            log.warning(
                "router: routing = %s but the workers publish no KV cache events ([kv_events] "
                "enable_kv_cache_events, publisher = zmq): the router will see no cached block and route "
                "by load alone",
                RoutingPolicyName.PREFIX_AWARE.value,
            )
            return None
        return FleetKvEvents(self.index, events.topic)

    @property
    def slots(self) -> list[WorkerSlot]:
        return self.supervisor.slots

    @property
    def ready(self) -> bool:
        return all(s.state is WorkerState.READY for s in self.slots)

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        await self.supervisor.start()
        self._tasks = [
            asyncio.create_task(self._pull_events_forever(), name="kvgate-router-events"),
            *(
                asyncio.create_task(self._probe_forever(slot), name=f"kvgate-probe-{slot.worker}")
                for slot in self.slots
            ),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.kv_events is not None:
            await self.kv_events.stop()
        await self.supervisor.stop()
        for client in self._clients:
            if client is not None:
                await client.aclose()

    def _on_ready(self, slot: WorkerSlot) -> None:
        old = self._clients[slot.worker]
        self._clients[slot.worker] = httpx.AsyncClient(
            base_url=slot.url,
            timeout=httpx.Timeout(None, connect=2.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
        )
        if old is not None:
            asyncio.ensure_future(old.aclose())
        self.events.emit(self.clock.now(), EventKind.WORKER_READY, worker=slot.worker)
        if self.kv_events is not None and slot.kv_events_endpoint is not None:
            self.kv_events.subscribe(slot.worker, slot.kv_events_endpoint, lambda: self._kv_snapshot(slot.worker))

    def _on_death(self, slot: WorkerSlot, cause: str) -> None:
        released = self.ledger.release_worker(slot.worker, cause)
        if self.kv_events is not None:
            self.kv_events.worker_lost(slot.worker)
        # Only the dead worker's streams end, unless a broken target is built on purpose.
        lost = [slot.worker] if self.config.server.end_only_lost_worker_streams else range(len(self.slots))
        for worker in lost:
            for relay in self._relays[worker]:
                relay.lose()
            self._relays[worker] = set()
        client, self._clients[slot.worker] = self._clients[slot.worker], None
        if client is not None:
            asyncio.ensure_future(client.aclose())
        log.warning(
            "router: worker %d (pid %s) lost (%s); released %d reservations (%d blocks); its streams end "
            "with worker_lost",
            slot.worker,
            slot.pid,
            cause,
            len(released),
            sum(r.num_blocks for r in released),
        )

    async def _kv_snapshot(self, worker: int) -> tuple[int, bytes] | None:
        """What `worker`'s KV cache events have announced so far (fleet_kv_events.py)."""
        client = self.client(worker)
        if client is None:
            return None
        headers = {"authorization": f"Bearer {self.admin_key}"}
        resp = await client.get("/admin/kv_events/snapshot", headers=headers, timeout=self.call_timeout)
        resp.raise_for_status()
        return int(resp.headers[KV_SEQ_HEADER]), resp.content

    def client(self, worker: int) -> httpx.AsyncClient | None:
        """The client of a ready worker (None while it starts, after it died)."""
        return self._clients[worker] if self.slots[worker].state is WorkerState.READY else None

    def track(self, relay: ProxyResponse, worker: int) -> None:
        """`relay` is in flight on `worker`: it ends with worker_lost if that worker dies."""
        self._relays[worker].add(relay)

    def untrack(self, relay: ProxyResponse, worker: int) -> None:
        self._relays[worker].discard(relay)

    async def pull_events(self) -> None:
        """Bring every ready worker's new events into the merged log (concurrently: a slow
        worker delays no other)."""
        await asyncio.gather(*(self._pull(slot) for slot in self.slots))

    async def _pull(self, slot: WorkerSlot) -> None:
        client = self.client(slot.worker)
        if client is None:
            return
        try:
            await self.puller.pull(client, slot.worker, slot.incarnation, self.call_timeout)
        except (httpx.HTTPError, ValueError) as err:
            log.debug("could not pull events from worker %d: %s", slot.worker, err)

    async def _probe_forever(self, slot: WorkerSlot) -> None:
        """Health-probe one worker slot for as long as the router runs (module docstring)."""
        interval_s, timeout_s = self.config.server.worker_probe_interval_s, self.config.server.worker_hang_timeout_s
        while True:
            await asyncio.sleep(interval_s)
            client, incarnation = self.client(slot.worker), slot.incarnation
            if client is None:
                continue
            try:
                await client.get("/health", timeout=self.call_timeout)
            except httpx.TimeoutException:
                if slot.incarnation == incarnation:
                    self.supervisor.kill(slot, f"hung: no answer to a health probe within {timeout_s:g} s")
            except httpx.TransportError:
                pass  # exiting or restarting: the supervisor sees the exit

    async def _pull_events_forever(self) -> None:
        while True:
            await asyncio.sleep(_PULL_INTERVAL_S)
            await self.pull_events()

    # ---------------------------------------------------------------- routing
    def authenticate(self, authorization: str | None) -> tuple[str | None, TenantConfig]:
        """The tenant of a key and its config (name None in open mode, where every key is welcome)."""
        name, tenant_config = self._tenants.authenticate(bearer_key(authorization))
        return (None if self._tenants.open_mode else name), tenant_config

    def new_request_id(self, kind: str) -> str:
        return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-r{self._nonce}-{next(self._ids):x}"

    def route_request(self, kind: str, payload: object) -> RouteRequest:
        """What the policy sees of a request: its worst-case blocks as the workers' admission counts
        them (0 for a body the worker will refuse), and the content keys of its prompt blocks when
        the policy reads them."""
        model = ChatCompletionRequest if kind == "chat" else CompletionRequest
        try:
            req = model.model_validate(payload)
            prompt = req.prompt_token_ids(self.tokenizer)
        except (ValueError, RequestError):
            return RouteRequest(0)
        max_new = req.max_new_tokens() or self.config.admission.max_new_tokens_default
        total = (len(prompt) + max_new) * self.config.admission.estimate_safety
        num_blocks = math.ceil(total / self.memory.block_tokens)
        if not self.policy.reads_prefixes:
            return RouteRequest(num_blocks)
        # the engine never hits the block holding a prompt's last token: it computes that token
        return RouteRequest(num_blocks, content_keys(prompt[:-1], self.memory.block_tokens))

    def estimate_blocks(self, kind: str, payload: object) -> int:
        return self.route_request(kind, payload).num_blocks

    def pick(self, exclude: set[int], session_key: str | None, request: RouteRequest = _NO_PROMPT) -> Pick:
        """The worker for a request: its session's, while that worker lives, else the policy's."""
        ready = [s for s in self._candidates() if s.worker not in exclude]
        if session_key is None or (home := self._sessions.get(session_key)) is None:
            return self._choose(ready, request, moved=False)
        worker, incarnation = home
        slot = self.slots[worker]
        if slot.incarnation == incarnation and slot in ready:
            return Pick(slot, False, reason="session")
        del self._sessions[session_key]
        return self._choose(ready, request, moved=True)

    def _candidates(self) -> list[WorkerSlot]:
        """The workers a request may go to: the ready ones (every slot, on a target broken on purpose)."""
        if not self.config.server.route_only_to_ready_workers:
            return list(self.slots)
        return [s for s in self.slots if s.state is WorkerState.READY]

    def _choose(self, ready: list[WorkerSlot], request: RouteRequest, *, moved: bool) -> Pick:
        if not ready:
            return Pick(None, moved)
        loads = [
            WorkerLoad(s.worker, self.ledger.reserved_blocks[s.worker], self.ledger.num_requests(s.worker))
            for s in ready
        ]
        decision = self.policy.choose(request, loads)
        return Pick(self.slots[decision.worker], moved, decision.matched_blocks)

    def note_routed(self, relay: ProxyResponse, pick: Pick) -> None:
        """Log a decision as a `routed` event (record/events.py): gates read where work went."""
        assert pick.slot is not None
        self.events.emit(
            self.clock.now(),
            EventKind.ROUTED,
            worker=pick.slot.worker,
            request_id=relay.request_id,
            tenant=relay.tenant,
            num_blocks=pick.matched_blocks,
            mode=self.policy.name,
            reason=pick.reason,
        )

    async def proxy(self, request: Request, kind: str) -> ProxyResponse:
        """The response that relays this completion request (401 here for an unknown key)."""
        tenant, tenant_config = self.authenticate(request.headers.get("authorization"))
        body = await request.body()
        request_id = request.state.request_id = self.new_request_id(kind)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        headers = {k: v for k in _FORWARDED if (v := request.headers.get(k)) is not None}
        headers[FORWARDED_ID_HEADER] = request_id  # the worker names the request as the ledger does
        headers[ROUTER_KEY_HEADER] = self.admin_key
        session_id = request.headers.get("x-session-id")
        # As the worker decides for an evicted session: the header and the tenant's rebuildable_sessions.
        rebuildable = session_rebuildable(request.headers.get("x-session-rebuildable"), tenant_config)
        return ProxyResponse(
            self,
            path=request.url.path,
            body=body,
            headers=headers,
            request_id=request_id,
            tenant=tenant,
            route=self.route_request(kind, payload),
            streaming=isinstance(payload, dict) and payload.get("stream") is True,
            session_key=f"{tenant}/{session_id}" if session_id else None,
            rebuildable=rebuildable,
        )

    def remember_session(self, session_key: str, slot: WorkerSlot) -> None:
        self._sessions[session_key] = (slot.worker, slot.incarnation)
        self._sessions.move_to_end(session_key)
        while len(self._sessions) > _MAX_SESSIONS:
            self._sessions.popitem(last=False)


class ProxyResponse(Response):
    """Relays one completion request to a worker (see the module docstring)."""

    background = None
    status_code = 200

    def __init__(
        self,
        router: Router,
        *,
        path: str,
        body: bytes,
        headers: dict[str, str],
        request_id: str,
        tenant: str | None,
        route: RouteRequest,
        streaming: bool,
        session_key: str | None,
        rebuildable: bool,
    ) -> None:
        self.router = router
        self.path = path
        self.request_body = body  # not `body`: that names the response's body on a starlette Response
        self.forward_headers = headers
        self.request_id = request_id
        self.tenant = tenant
        self.route = route
        self.num_blocks = route.num_blocks
        self.streaming = streaming
        self.session_key = session_key
        self.rebuildable = rebuildable
        self.worker: int | None = None
        self.started = False  # the status line went out
        self._lost = asyncio.Event()

    def lose(self) -> None:
        """Its worker died: end the relay with worker_lost (called by the router)."""
        self._lost.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relay = asyncio.ensure_future(self._relay(scope, receive, send))
        watcher = asyncio.ensure_future(self._watch_disconnect(receive))
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({relay, watcher, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            lost.cancel()
            if not relay.done():  # the client left, or the worker died: closing upstream ends it there
                relay.cancel()
            await asyncio.gather(relay, return_exceptions=True)
        if relay.cancelled() and self._lost.is_set():
            await self._end_worker_lost(scope, receive, send, "it stopped answering")

    async def _watch_disconnect(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _connect(self) -> tuple[httpx.Response, bool]:
        """Reserve and send to a worker, retrying others that cannot be reached. (response, rebuilt)"""
        router, rebuilt = self.router, False
        tried: set[int] = set()
        while True:
            pick = router.pick(tried, self.session_key, self.route)
            slot, moved = pick.slot, pick.moved
            rebuilt = rebuilt or moved
            if moved and not self.rebuildable:
                raise ContextExpiredError(
                    "the worker that held this session's KV was lost and the session is not "
                    "rebuildable; start a new session (new X-Session-Id) with the full context"
                )
            if slot is None:
                raise WorkerLostError("no engine worker is ready; retry shortly", retry_after_s=1.0)
            tried.add(slot.worker)
            router.note_routed(self, pick)
            client = router.client(slot.worker)
            if client is None:
                continue
            router.ledger.reserve(self.request_id, slot.worker, self.num_blocks, self.tenant)
            self.worker = slot.worker
            router.track(self, slot.worker)
            try:
                request = client.build_request(
                    "POST", self.path, content=self.request_body, headers=self.forward_headers
                )
                response = await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as err:
                router.untrack(self, slot.worker)
                router.ledger.release(self.request_id, "worker_lost")
                router.num_retries += 1
                log.warning(
                    "request %s: worker %d unreachable (%s); retrying on another worker",
                    self.request_id,
                    slot.worker,
                    err,
                )
                continue
            if self.session_key is not None:
                router.remember_session(self.session_key, slot)
            return response, rebuilt

    async def _relay(self, scope: Scope, receive: Receive, send: Send) -> None:
        upstream, reason = None, "finished"
        try:
            upstream, rebuilt = await self._connect()
            headers = [(k, v) for k, v in upstream.headers.raw if k.lower() not in _HOP_BY_HOP]
            if rebuilt:
                headers.append((b"x-kvgate-session-rebuilt", b"true"))
            await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers})
            self.started = True
            async for chunk in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except RequestError as err:
            await error_response(err, self.request_id)(scope, receive, send)
        except httpx.TransportError as err:
            reason = "worker_lost"
            await self._end_worker_lost(scope, receive, send, type(err).__name__)
        finally:
            if upstream is not None:
                await upstream.aclose()
            if self.worker is not None:
                self.router.untrack(self, self.worker)
            self.router.ledger.release(self.request_id, reason)

    async def _end_worker_lost(self, scope: Scope, receive: Receive, send: Send, cause: str) -> None:
        """503 worker_lost, or after the first byte an SSE error event (non-streaming: the body
        just ends)."""
        self.router.num_worker_lost_requests += 1
        lost = WorkerLostError(
            f"engine worker {self.worker} was lost while serving this request ({cause}); retry it", retry_after_s=1.0
        )
        if not self.started:
            await error_response(lost, self.request_id)(scope, receive, send)
        else:
            tail = error_event(lost) + DONE if self.streaming else b""
            await send({"type": "http.response.body", "body": tail, "more_body": False})
