"""Multi-turn sessions: KV kept between turns, and an explicit answer when it is gone.

A session holds a reference (a *hold*) on the full blocks of its last turn while it is idle, so
the next turn's prompt hits them in the prefix cache. Held blocks are live and count toward
usage and the tenant's share; that is the memory the evict watermark reclaims.

    ACTIVE   a turn is running; the session cannot be evicted
    IDLE     between turns; in its tenant's eviction index and in the idle-timeout order
    EVICTED  reclaimed by the policy (watermark, capacity, overflow, session token cap)
    EXPIRED  idle past max_session_idle_seconds

A turn on an EVICTED or EXPIRED session is either rebuilt (re-prefilled, and flagged so the
client knows) when the session is rebuildable, or refused with 410 `context_expired`; never a
silent, incoherent continuation. Ended sessions are remembered (bounded) to give that answer.

Costs: begin/end turn O(blocks held); idle expiry O(1) per expired session (the idle order is an
`OrderedDict` by last access, and the timeout is one constant); victim choice O(tenants).
Evictions return (session, blocks it held) pairs, so the caller can report them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from record.errors import ContextExpiredError
from reference_engine.core.block_pool import BlockPool
from reference_engine.core.tenants import TenantState
from reference_engine.policies.base import EntryMeta, EvictionIndex, IndexKind


class SessionState(str, Enum):
    ACTIVE = "active"
    IDLE = "idle"
    EVICTED = "evicted"
    EXPIRED = "expired"


@dataclass(eq=False, slots=True)
class Session:
    session_id: str
    tenant: TenantState
    rebuildable: bool
    created_s: float
    state: SessionState = SessionState.ACTIVE
    blocks: list[int] = field(default_factory=list)
    num_tokens: int = 0
    last_access_s: float = 0.0
    active_turns: int = 0
    turns: int = 0
    rebuilds: int = 0
    rebuild_cost_s: float = 0.0
    end_reason: str | None = None

    @property
    def key(self) -> str:
        """Session ids are scoped to their tenant: the same id from two tenants is two sessions."""
        return f"{self.tenant.name}/{self.session_id}"

    @property
    def is_retained(self) -> bool:
        return self.state in (SessionState.ACTIVE, SessionState.IDLE)


class SessionStore:
    def __init__(
        self,
        pool: BlockPool,
        make_index: Callable[[IndexKind], EvictionIndex],
        idle_timeout_s: float,
        max_tokens_per_session: int,
        max_remembered: int = 100_000,
    ) -> None:
        self._pool = pool
        self._make_index = make_index
        self.idle_timeout_s = idle_timeout_s
        self.max_tokens_per_session = max_tokens_per_session
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._max_remembered = max_remembered
        self._idle: OrderedDict[str, Session] = OrderedDict()  # oldest last access first
        self._index: dict[str, EvictionIndex[str]] = {}  # per tenant name, keyed by Session.key
        self._tenants: dict[str, TenantState] = {}

    def get(self, tenant: str, session_id: str) -> Session | None:
        return self._sessions.get(f"{tenant}/{session_id}")

    def __iter__(self):
        return iter(list(self._sessions.values()))

    @property
    def num_idle(self) -> int:
        return len(self._idle)

    # ------------------------------------------------------------------ turns
    def check(self, session_id: str, tenant: TenantState, rebuildable: bool) -> Session | None:
        """The existing session for a new turn (None if new). Raises ContextExpiredError when its
        state is gone and it cannot be rebuilt; changes nothing."""
        s = self._sessions.get(f"{tenant.name}/{session_id}")
        if s is not None and not s.is_retained and not (s.rebuildable and rebuildable):
            raise ContextExpiredError(
                f"session {session_id!r} {s.state.value} ({s.end_reason}) and is not rebuildable: its KV "
                f"state is gone. Start a new session (new X-Session-Id) with the full context."
            )
        return s

    def begin_turn(self, session_id: str, tenant: TenantState, rebuildable: bool, now_s: float) -> tuple[Session, bool]:
        """The session for a new turn and whether it must be rebuilt (after `check` passed)."""
        s = self._sessions.get(f"{tenant.name}/{session_id}")
        rebuilt = False
        if s is None:
            s = Session(session_id, tenant, rebuildable, created_s=now_s)
            self._remember(s)
        elif not s.is_retained:
            s.state, rebuilt = SessionState.ACTIVE, True
            s.rebuilds += 1
        elif s.state is SessionState.IDLE:
            self._unindex(s, now_s)
            del self._idle[s.key]
            s.state = SessionState.ACTIVE
        s.rebuildable = s.rebuildable and rebuildable
        s.active_turns += 1
        s.last_access_s = now_s
        self._sessions.move_to_end(s.key)
        return s, rebuilt

    def end_turn(
        self,
        s: Session,
        blocks: list[int],
        num_tokens: int,
        meta: EntryMeta,
        now_s: float,
        rebuild_cost_s: float,
        completed: bool,
    ) -> int:
        """Retain `blocks` (the finished turn's full blocks) in place of the previous ones.

        Returns the number of blocks retained; 0 when the session exceeded its token cap and is
        therefore released (the next turn will be a rebuild or a 410)."""
        s.active_turns -= 1
        s.last_access_s = now_s
        if completed:
            if num_tokens > self.max_tokens_per_session:
                self._release(s, SessionState.EVICTED, "session_cap", now_s)
                return 0
            self._pool.incref(blocks, now_s, hold=True)
            self._pool.decref(s.blocks, now_s, meta, hold=True)
            s.tenant.retained_blocks += len(blocks) - len(s.blocks)
            s.blocks, s.num_tokens, s.rebuild_cost_s = list(blocks), num_tokens, rebuild_cost_s
            s.turns += 1
        if s.active_turns == 0 and s.is_retained:
            s.state = SessionState.IDLE
            self._idle[s.key] = s
            self._idle.move_to_end(s.key)
            # An idle session is a conversation still going on: active, for multi_queue's FIFO 2.
            self._index_idle(s, meta.last_access_s, now_s)
        return len(s.blocks)

    def _index_idle(self, s: Session, last_access_s: float | None, now_s: float) -> None:
        """Index an idle session by what it holds: its own rebuild cost, not the last turn's
        (a turn that did not complete left the session's earlier blocks and cost in place)."""
        self._tenant_index(s.tenant).insert(
            [s.key],
            EntryMeta(
                size_blocks=max(1, len(s.blocks)),
                tokens=s.num_tokens,
                tenant=s.tenant.name,
                priority=s.tenant.traffic_class.priority,
                saved_prefill_s=s.rebuild_cost_s,
                is_active=True,
                last_access_s=last_access_s,
            ),
            now_s,
        )

    # --------------------------------------------------------------- eviction
    def next_expiry_s(self) -> float | None:
        """When the longest-idle session times out (None if none is idle)."""
        if not self._idle:
            return None
        return next(iter(self._idle.values())).last_access_s + self.idle_timeout_s

    def expire_idle(self, now_s: float) -> list[Session]:
        expired = []
        while self._idle:
            s = next(iter(self._idle.values()))
            if now_s - s.last_access_s < self.idle_timeout_s:
                break
            self._release(s, SessionState.EXPIRED, "idle_timeout", now_s)
            expired.append(s)
        return expired

    def evict(
        self,
        num_blocks: int,
        now_s: float,
        low_priority_first: bool,
        tenant: TenantState | None = None,
        *,
        strict: bool = False,
        keep: str | None = None,
    ) -> list[tuple[Session, int]]:
        """Evict idle sessions covering at least `num_blocks` (fewer if there are not enough).

        Tenants are visited lowest class first (if `low_priority_first`), then by retention
        pressure (much cache, little traffic first); within a tenant the policy's index decides.
        `strict` (a rate-limited tick): never more than `num_blocks`, except one session larger
        than the whole budget when nothing else fits, so that a tick always makes progress.
        `keep`: a session id never evicted here (the session a new turn is being admitted for);
        it is taken out of the index for the duration and put back as just accessed.
        """
        spared = self._sessions.get(f"{tenant.name}/{keep}") if tenant and keep else None
        if spared is not None and spared.state is SessionState.IDLE:
            self._unindex(spared, now_s)
        else:
            spared = None
        evicted: list[tuple[Session, int]] = []
        freed = 0
        while freed < num_blocks:
            victim_tenant = tenant.name if tenant else self._pick_tenant(now_s, low_priority_first)
            if victim_tenant is None:
                break
            index = self._index.get(victim_tenant)
            if not index:
                break
            keys = index.pop_victims(num_blocks - freed, now_s, strict=strict)
            if not keys and strict and not evicted:
                keys = index.pop_victims(1, now_s)
            if not keys:
                break
            for sid in keys:
                s = self._sessions[sid]
                num = self._release(s, SessionState.EVICTED, "evicted", now_s, indexed=False)
                freed += num
                evicted.append((s, num))
        if spared is not None:
            self._index_idle(spared, None, now_s)
        return evicted

    def evict_overflow(self, tenant: TenantState, now_s: float) -> list[tuple[Session, int]]:
        """Evict the idle sessions of `tenant` beyond its index's capacity (set by the policy)."""
        index = self._index.get(tenant.name)
        if index is None:
            return []
        return [
            (s, self._release(s, SessionState.EVICTED, "overflow", now_s, indexed=False))
            for s in [self._sessions[key] for key in index.pop_overflow(now_s)]
        ]

    def _pick_tenant(self, now_s: float, low_priority_first: bool) -> str | None:
        best, best_key = None, None
        for name, index in self._index.items():
            if not index:
                continue
            t = self._tenants[name]
            key = (t.traffic_class.priority if low_priority_first else 0, -t.retention_pressure(now_s))
            if best_key is None or key < best_key:
                best, best_key = name, key
        return best

    def _release(self, s: Session, state: SessionState, reason: str, now_s: float, indexed: bool = True) -> int:
        """End `s`'s retention; returns how many blocks it held."""
        assert s.state is not SessionState.ACTIVE or not self._idle.get(s.key), "an active session was idle-listed"
        self._idle.pop(s.key, None)
        if s.state is SessionState.IDLE and indexed:
            self._unindex(s, now_s)
        self._pool.decref(
            s.blocks,
            now_s,
            EntryMeta(tokens=s.num_tokens, tenant=s.tenant.name, priority=s.tenant.traffic_class.priority),
            hold=True,
        )
        num_blocks = len(s.blocks)
        s.tenant.retained_blocks -= num_blocks
        s.blocks = []
        s.state, s.end_reason = state, reason
        return num_blocks

    def _unindex(self, s: Session, now_s: float) -> None:
        index = self._index.get(s.tenant.name)
        if index is not None and s.key in index:
            index.remove(s.key, now_s)

    def _tenant_index(self, tenant: TenantState) -> EvictionIndex[str]:
        index = self._index.get(tenant.name)
        if index is None:
            index = self._index[tenant.name] = self._make_index(IndexKind.SESSIONS)
            self._tenants[tenant.name] = tenant
        return index

    def _remember(self, s: Session) -> None:
        self._sessions[s.key] = s
        while len(self._sessions) > self._max_remembered:
            _, old = next(iter(self._sessions.items()))
            if old.is_retained:
                break
            self._sessions.popitem(last=False)
