"""Engine events as a run record keeps them: the kinds, and the typed columns each one fills.

Every event is one flat `Event` row (so a log is a table: pandas-ready, CSV-ready), with the
columns a kind does not use left as None. Each column means one thing for every kind that uses
it. The catalogue below is the single place that says which kinds exist and what each carries;
`docs/run_record.md` repeats it for readers of a record.

    kind                  request_id tenant  other columns
    admitted              yes        yes     num_tokens = prompt tokens, num_blocks = estimate,
                                             client_request_id = the client's X-Request-Id (a label)
    queued                yes        yes     num_blocks = estimate, deadline_s (engine s),
                                             client_request_id
    rejected              yes        yes     reason = kv_capacity | tenant_quota | queue_deadline |
                                             context_length_exceeded | context_expired; refused on
                                             arrival: num_tokens = prompt, num_blocks = estimate,
                                             tenant_live_blocks = the tenant's live blocks then,
                                             mode = the limit behind a tenant_quota (kv_share |
                                             active_seqs | reserved_tokens); client_request_id
    scheduled             yes        yes     num_tokens = prefix-cache hit tokens
    first_token           yes        yes     latency_s = TTFT measured by the engine
    preempted             yes        yes     mode = recompute | swap | kill, num_blocks freed,
                                             num_tokens = computed tokens discarded, to be
                                             computed again (recompute; 0 for swap and kill), reason
    swapped               yes        yes     num_blocks moved to host, num_bytes moved
    resumed               yes        yes     mode = recompute | swap
    cancel_received       yes        yes
    blocks_released       yes        yes     num_blocks, latency_s = cancel_received -> released,
                                             reason = cancelled | finished | preempted | failed
    finished              yes        yes     reason = stop | length | cancelled | oom | worker_lost,
                                             num_tokens = output tokens, latency_s = end-to-end
    evicted               opt        yes     an idle session evicted: num_blocks it held, reason =
                                             watermark | capacity | tenant_quota | overflow,
                                             mode = policy name
    expired               opt        yes     session idle timeout: num_blocks released
    approximated          yes        yes     num_tokens dropped by a token-level policy, num_blocks
                                             freed, mode = policy name
    oom                   opt        opt     num_blocks that could not be allocated, reason
    watermark             -          -       reason = level name entered (warn, evict, ...), usage =
                                             live blocks / pool blocks at that step
    worker_died           -          -       worker (the `worker` column), reason = signal/exit
    worker_ready          -          -       worker: it answers /ready and may be routed to again
    routed                yes        yes     the router sent the request to `worker`: mode = its
                                             routing policy, num_blocks = prompt blocks it
                                             expected that worker to hold (0 unless prefix_aware),
                                             reason = policy | session (kept on its session's worker)
    reservation_released  yes        yes     num_blocks, reason = worker_lost | finished
    orphan_reconciled     -          -       num_blocks freed by the periodic orphan check
    tier_load             yes        yes     prefix blocks found in a tier below the GPU: mode = host |
                                             disk, num_blocks / num_tokens / num_bytes from that tier,
                                             latency_s = load time (queueing included; for
                                             slower_than_prefill the time it would have taken),
                                             reason = ok | failed | slower_than_prefill (the two
                                             recomputed instead; the last also past max_load_wait_ms)
                                             | served_corrupt (failed, served anyway: fallback off)
    transfer_started      yes        yes     P/D (docs/pd.md): the decode side reserved num_blocks and
                                             pulls num_bytes of prompt KV; num_tokens = prompt tokens
                                             it already held (its own prefix hits, not pulled)
    transfer_finished     yes        yes     the pull landed: num_blocks, num_bytes, latency_s = from
                                             the prefill's end to the KV on the decode side
    transfer_failed       yes        yes     reason = failed | timeout | cancelled | source_lost
                                             (its prefill engine died), mode = what came of it:
                                             local_prefill | error | unresolved (a broken
                                             target); latency_s = from the prefill's end

Two kinds come from outside the engine (a target without kvgate's admin API; the harness
stamps them with its own clock and numbers them apart from the engine's `seq`):

    engine_restart        -          -       the engine went away: reason = process_start_time (the
                                             scraped process start time changed) | health (/health
                                             failed; latency_s = until it answered again, empty:
                                             it never did before the run ended)
    log_match             -          -       a known line in the target's log (--target-log):
                                             reason = the pattern's name, mode = oom | pressure;
                                             the line itself is never kept (it may hold keys)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum


class EventKind(str, Enum):
    ADMITTED = "admitted"
    QUEUED = "queued"
    REJECTED = "rejected"
    SCHEDULED = "scheduled"
    FIRST_TOKEN = "first_token"
    PREEMPTED = "preempted"
    SWAPPED = "swapped"
    RESUMED = "resumed"
    CANCEL_RECEIVED = "cancel_received"
    BLOCKS_RELEASED = "blocks_released"
    FINISHED = "finished"
    EVICTED = "evicted"
    EXPIRED = "expired"
    APPROXIMATED = "approximated"
    OOM = "oom"
    WATERMARK = "watermark"
    WORKER_DIED = "worker_died"
    WORKER_READY = "worker_ready"
    ROUTED = "routed"
    RESERVATION_RELEASED = "reservation_released"
    ORPHAN_RECONCILED = "orphan_reconciled"
    TIER_LOAD = "tier_load"
    TRANSFER_STARTED = "transfer_started"
    TRANSFER_FINISHED = "transfer_finished"
    TRANSFER_FAILED = "transfer_failed"
    ENGINE_RESTART = "engine_restart"
    LOG_MATCH = "log_match"


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    t_s: float
    kind: EventKind
    request_id: str | None = None
    tenant: str | None = None
    traffic_class: str | None = None
    num_blocks: int | None = None
    num_tokens: int | None = None
    latency_s: float | None = None
    deadline_s: float | None = None
    tenant_live_blocks: int | None = None
    num_bytes: int | None = None
    usage: float | None = None
    reason: str | None = None
    mode: str | None = None
    client_request_id: str | None = None

    def to_row(self) -> dict:
        """The event as {column: value} in EVENT_COLUMNS order, `kind` as its string value. Written
        out by hand (not `dataclasses.asdict`, which deep-copies): it runs once per event exported."""
        return {
            "seq": self.seq,
            "t_s": self.t_s,
            "kind": self.kind.value,
            "request_id": self.request_id,
            "tenant": self.tenant,
            "traffic_class": self.traffic_class,
            "num_blocks": self.num_blocks,
            "num_tokens": self.num_tokens,
            "latency_s": self.latency_s,
            "deadline_s": self.deadline_s,
            "tenant_live_blocks": self.tenant_live_blocks,
            "num_bytes": self.num_bytes,
            "usage": self.usage,
            "reason": self.reason,
            "mode": self.mode,
            "client_request_id": self.client_request_id,
        }


EVENT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Event))
# Events as /admin/events serves them and a run record keeps them: each also names the worker
# that made it (None: a single engine process, or the router itself).
WORKER_EVENT_COLUMNS: tuple[str, ...] = (*EVENT_COLUMNS, "worker")
