"""The engine's configuration: validated pydantic models, one per TOML table.

Key names follow common usage where there is one (`[kv_cache] policy, max_session_idle_seconds,
max_tokens_per_session, evict_low_priority_first`, `[kv_cache.guard] warn_at_percent /
evict_at_percent / reject_at_percent`, `kv_pool_gib`, `block_tokens`, `queue_deadline_ms`,
`max_new_tokens_default`, `interactive_reserve`, `tenant max_kv_share`), so an operator can read a
config against their own notes; docs/background.md says which keys are kvgate's own, and why.
Unknown keys are errors (`extra="forbid"`), so a typo never silently means "default".
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field, model_validator

from reference_engine.catalog import GPUS, MODELS, DType
from reference_engine.config.policies import (
    ConfigTable,
    H2oConfig,
    LruConfig,
    MultiQueueConfig,
    StreamingLlmConfig,
    ValueDensityConfig,
    ZonesConfig,
)


class TrafficClass(str, Enum):
    """Server-side traffic class of a tenant; it alone decides priority."""

    SYSTEM = "system"
    INTERACTIVE = "interactive"
    BATCH = "batch"

    @property
    def priority(self) -> int:
        """Higher runs first and is preempted last."""
        return {"system": 2, "interactive": 1, "batch": 0}[self.value]


class PolicyName(str, Enum):
    LRU = "lru"
    MULTI_QUEUE = "multi_queue"
    VALUE_DENSITY = "value_density"
    ZONES = "zones"
    STREAMINGLLM = "streamingllm"
    H2O = "h2o"
    NONE = "none"
    VLLM_LIKE = "vllm_like"


class RoutingPolicyName(str, Enum):
    """How the router of multi-worker mode picks a worker (reference_engine/routing/)."""

    LEAST_LOADED = "least_loaded"  # fewest reserved blocks, then fewest requests
    ROUND_ROBIN = "round_robin"  # each ready worker in turn
    PREFIX_AWARE = "prefix_aware"  # cached prefix blocks (from the workers' KV events) against load


class KvEventsPublisher(str, Enum):
    ZMQ = "zmq"
    NULL = "null"


class PrefixSharing(str, Enum):
    """Who may hit whose cached prefix blocks (declared public prefixes are shared in every mode)."""

    TENANT = "tenant"  # a tenant's blocks, per cache_salt: the safe default
    SALT = "salt"  # every tenant's unsalted blocks are shared; a cache_salt isolates (vLLM's behaviour)
    GLOBAL = "global"  # every block is shared, cache_salt ignored (an engine without salts, e.g. llama.cpp's)


class TierKeyScope(str, Enum):
    """What the KV tiers below the GPU key a block by: what part of its prefix scope survives
    the trip down (only the first is safe; the others rebuild offload bugs seen in the field)."""

    REQUEST = "request"  # the block's own prefix key: its tenant and its cache_salt, as in the GPU pool
    NO_SALT = "no_salt"  # the salt dropped: any salt of the tenant hits (an offload store that ignores salts)
    NO_TENANT = "no_tenant"  # the tenant dropped: every tenant's unsalted blocks share one key below the GPU


class PreemptionMode(str, Enum):
    AUTO = "auto"  # swap when kv_bytes / link_bw < prefill_time(len), else recompute
    RECOMPUTE = "recompute"
    SWAP = "swap"
    KILL = "kill"  # abort the victim with 503 `preempted`: what an engine without swap or recompute does


class ModelConfig(ConfigTable):
    """The served model: a catalog entry (reference_engine/catalog/models.py) and its dtypes."""

    name: str = Field("llama-3.1-8b", description="catalog model name; decides KV bytes, context limit, time model")
    weight_dtype: DType = Field(DType.BF16, description="bf16 | fp16 | fp8 | fp32: weight bytes in the memory plan")
    kv_dtype: DType = Field(DType.BF16, description="KV cache dtype: fp8 halves bytes per token")
    tokenizer: str = Field("kvgate-words-v1", description="part of the prefix-cache scope")
    chat_template: str = Field("kvgate-chat-v1", description="part of the prefix-cache scope")
    adapter: str = Field("", description="LoRA adapter name; part of the prefix-cache scope")

    @model_validator(mode="after")
    def _known(self) -> ModelConfig:
        if self.name not in MODELS:
            raise ValueError(f"unknown model {self.name!r}; valid: {', '.join(sorted(MODELS))}")
        return self


class HardwareConfig(ConfigTable):
    """The GPU the memory plan and the time model assume."""

    gpu: str = Field("h100-sxm", description="catalog GPU name (a100-80g, h100-sxm, h200)")
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1, description="share of GPU memory the engine may use")
    workspace_gib: float = Field(4.0, ge=0, description="activations and runtime workspace, not KV")
    kv_pool_gib: float | None = Field(None, gt=0, description="pin the KV pool size instead of deriving it")

    @model_validator(mode="after")
    def _known(self) -> HardwareConfig:
        if self.gpu not in GPUS:
            raise ValueError(f"unknown gpu {self.gpu!r}; valid: {', '.join(sorted(GPUS))}")
        return self


class BindingConfig(ConfigTable):
    """What the config was calibrated for; a non-empty field that does not match is an error."""

    model_digest: str = Field("", description="digest of the model spec + dtypes (shown by `kvgate serve`)")
    runtime_version: str = Field("", description="kvgate version the thresholds were tuned on")
    gpu_sku: str = Field("", description="GPU the thresholds were tuned on (must equal hardware.gpu)")


class EngineSection(ConfigTable):
    """Paging and batching limits, and which executor runs the steps."""

    block_tokens: int = Field(16, ge=1, le=1024, description="tokens per KV block (page)")
    max_num_seqs: int = Field(256, ge=1, description="running sequences per step at most")
    max_num_batched_tokens: int = Field(
        1024,
        ge=16,
        description="per-step token budget (chunked prefill): "
        "smaller steps keep short requests' TTFT low, larger ones raise throughput",
    )
    long_prefill_token_threshold: int = Field(
        256,
        ge=0,
        description="while requests wait to start, a prefill chunk "
        "takes at most this many tokens per step (0: no cap), so one long "
        "prompt cannot hold the whole budget (vLLM's option of that name)",
    )
    executor: str = Field("sim", description="sim (time model, any machine) | torch (real model, optional extra)")
    kv_bytes_safety: float = Field(1.0, ge=1.0, le=2.0, description="the `safety` factor in bytes_per_token")
    seed: int = Field(0, description="reserved for executors that sample; the sim's tokens depend on request ids")

    @model_validator(mode="after")
    def _decodes_fit(self) -> EngineSection:
        if self.max_num_seqs > self.max_num_batched_tokens:
            raise ValueError(
                f"max_num_seqs ({self.max_num_seqs}) must not exceed max_num_batched_tokens "
                f"({self.max_num_batched_tokens}): every running sequence decodes in every step"
            )
        return self


class GuardConfig(ConfigTable):
    """The watermark ladder on live usage, in percent of the pool, cheapest measure first (docs/background.md)."""

    warn_at_percent: float = Field(75, gt=0, le=100, description="shorten max output of new requests")
    admission_at_percent: float = Field(82, gt=0, le=100, description="stop admitting low-priority long requests")
    evict_at_percent: float = Field(85, gt=0, le=100, description="evict reusable cached state")
    pause_batch_prefill_at_percent: float = Field(88, gt=0, le=100, description="no new batch prefill")
    preempt_at_percent: float = Field(92, gt=0, le=100, description="the hard watermark: preempt recoverable work")
    reject_at_percent: float = Field(95, gt=0, le=100, description="reject new requests")
    interactive_reserve_percent: float = Field(25, ge=0, lt=100, description="pool share batch traffic cannot take")
    warn_max_new_tokens: int = Field(512, ge=1, description="max output granted to new requests above warn")
    long_request_tokens: int = Field(4096, ge=1, description="'long' for the admission watermark")

    @model_validator(mode="after")
    def _ordered(self) -> GuardConfig:
        ladder = [
            ("warn_at_percent", self.warn_at_percent),
            ("admission_at_percent", self.admission_at_percent),
            ("evict_at_percent", self.evict_at_percent),
            ("pause_batch_prefill_at_percent", self.pause_batch_prefill_at_percent),
            ("preempt_at_percent", self.preempt_at_percent),
            ("reject_at_percent", self.reject_at_percent),
        ]
        for (lo_name, lo), (hi_name, hi) in zip(ladder, ladder[1:]):
            if not lo < hi:
                raise ValueError(f"watermarks must increase: {lo_name} = {lo} is not below {hi_name} = {hi}")
        return self


class AccountingConfig(ConfigTable):
    """What the KV ledger tracks, for quotas and cost attribution; expose_admin_query serves it on /admin/ledger."""

    track_tenant: bool = Field(True, description="ledger lines per tenant")
    track_page_count: bool = Field(True, description="pages per request and session")
    track_rebuild_cost: bool = Field(True, description="re-prefill cost per request and session")
    expose_admin_query: bool = Field(True, description="serve the ledger on the admin API")


class KvCacheConfig(ConfigTable):
    """The [kv_cache] table: policy, session limits, guard ladder, accounting."""

    policy: PolicyName = Field(
        PolicyName.LRU, description="lru | multi_queue | value_density | zones | streamingllm | h2o | none | vllm_like"
    )
    max_session_idle_seconds: float = Field(120, gt=0, description="idle sessions past this expire (410 or rebuild)")
    max_tokens_per_session: int = Field(8192, ge=1, description="longer sessions are not retained between turns")
    evict_low_priority_first: bool = Field(True, description="evict batch sessions before interactive, system last")
    pinned_max_percent: float = Field(
        20,
        ge=0,
        le=50,
        description="hard cap on pinned prefixes: past 20-25 % of the "
        "pool, pinning costs more concurrency than its hits save",
    )
    guard: GuardConfig = GuardConfig()
    accounting: AccountingConfig = AccountingConfig()


class AdmissionConfig(ConfigTable):
    """Admission before the run queue: estimate the worst case, then admit / queue / reject."""

    enabled: bool = Field(True, description="off: everything is admitted (a broken-target setting)")
    max_new_tokens_default: int = Field(1024, ge=1, description="assumed when a request sets no max_tokens")
    estimate_safety: float = Field(1.1, ge=1.0, le=4.0, description="multiplies the block estimate")
    queue_deadline_ms: float = Field(8000, gt=0, description="a request not running by then gets 429 queue_deadline")
    batch_queue_deadline_ms: float | None = Field(
        30000, gt=0, description="the same for batch traffic, which waits out a peak (None: queue_deadline_ms)"
    )
    max_queue_len: int = Field(512, ge=0, description="waiting requests at most; beyond: 429 kv_capacity")

    def queue_deadline_for(self, traffic_class: TrafficClass) -> float:
        """How long a request of this class may wait to start, in ms: a chat user's patience, or
        an offline job's, which the pause-batch rung holds back for the length of a peak."""
        if traffic_class is TrafficClass.BATCH and self.batch_queue_deadline_ms is not None:
            return self.batch_queue_deadline_ms
        return self.queue_deadline_ms


class PreemptionConfig(ConfigTable):
    """Preemption of running work and the starvation guards shared by every policy."""

    enabled: bool = Field(True, description="off: an allocation that does not fit is an OOM")
    mode: PreemptionMode = Field(
        PreemptionMode.AUTO,
        description="auto | recompute | swap | kill (abort the victim: a baseline to compare against)",
    )
    host_swap_gib: float = Field(64, ge=0, description="host memory for swapped-out KV")
    max_consecutive_preemptions: int = Field(2, ge=1, description="then the request is protected until it progresses")
    aging_s: float = Field(10, gt=0, description="waiting this long raises priority by one class")
    min_batch_token_share: float = Field(0.05, ge=0, le=1, description="step budget batch keeps while it waits")


class TiersConfig(ConfigTable):
    """KV tiers below the GPU pool. Host DRAM and disk keep the cached prefix blocks the pool
    evicts (each tier in LRU order with its own capacity, each tenant at most its `max_kv_share`
    of it; write-back bounded by bandwidth and backlog); a later prefix hit loads them back when
    that ends before re-prefilling them would, and recomputes otherwise or when the load fails
    (docs/policies.md, "KV tiers: offload or re-prefill"). The host tier is its own share of host
    memory, apart from `preemption.host_swap_gib`: swap space holds the only copy of a preempted
    request's KV and is needed at the peaks that preempt, which are also when the pool evicts
    most; one shared budget would let cached copies push preempted requests into recompute just
    then. The engine's host memory is `host_swap_gib + host_gib`.
    """

    host_gib: float = Field(0, ge=0, description="host memory for evicted prefix blocks (0: no host tier)")
    disk_gib: float = Field(0, ge=0, description="disk space for blocks the host tier evicts (0: no disk tier)")
    host_write_gbps: float | None = Field(
        None, gt=0, description="GPU-to-host write-back bandwidth, GB/s (None: the GPU's host link)"
    )
    host_read_gbps: float | None = Field(
        None, gt=0, description="host-to-GPU load bandwidth, GB/s (None: the GPU's host link)"
    )
    disk_write_gbps: float = Field(3.0, gt=0, description="host-to-disk write-back bandwidth, GB/s")
    disk_read_gbps: float = Field(6.0, gt=0, description="disk-to-GPU load bandwidth, GB/s (NVMe Gen4 read)")
    max_write_backlog_ms: float = Field(
        50, ge=0, description="write-back queued beyond this is dropped, not demoted (counted)"
    )
    max_load_wait_ms: float = Field(
        2000, gt=0, description="a load that would end later than this is not started: the tokens are recomputed"
    )
    load_failure_rate: float = Field(
        0,
        ge=0,
        le=1,
        description="share of loads whose copy arrives corrupt (seeded, deterministic; its checksum "
        "tells): chaos testing",
    )
    failure_seed: int = Field(0, description="seed of the injected load failures")
    fallback_to_recompute: bool = Field(
        True,
        description="off only to build a broken target: every load found is waited for however "
        "slow, and one that failed is served as it arrived",
    )
    key_scope: TierKeyScope = Field(
        TierKeyScope.REQUEST,
        description="request only, but to build a broken target: the part of a block's prefix scope the "
        "tiers key it by (no_salt, no_tenant: another salt or tenant hits it once it left the GPU)",
    )


class PdFailure(str, Enum):
    LOCAL_PREFILL = "local_prefill"  # the decode side prefills the prompt itself
    ERROR = "error"  # the request ends with finish reason `error`


class PdConfig(ConfigTable):
    """Disaggregated prefill and decode (docs/pd.md): a prefill pool and a decode pool, each an
    engine of its own (its pool, watermarks and admission: the dotted overrides of `prefill` and
    `decode` apply to it alone), and a link between them. A request prefills on the prefill side,
    the decode side reserves its blocks, pulls the prompt's KV over the link and decodes. The link
    is priced as vLLM's connectors pay it: a setup per transfer, a latency, bytes over bandwidth,
    one transfer at a time."""

    enabled: bool = Field(False, description="on: two pools and a link (the trace replay and bench drive it)")
    prefill: dict[str, str | int | float | bool] = Field(
        {}, description="dotted config keys for the prefill side alone, e.g. 'hardware.kv_pool_gib'"
    )
    decode: dict[str, str | int | float | bool] = Field({}, description="dotted config keys for the decode side alone")
    link_gbps: float = Field(25.0, gt=0, description="link bandwidth, GB/s (200 Gb/s RDMA: 25)")
    link_latency_ms: float = Field(0.5, ge=0, description="one-way latency of a transfer")
    transfer_setup_ms: float = Field(2.0, ge=0, description="fixed cost of each transfer (handshake, registration)")
    transfer_timeout_ms: float = Field(
        5000, gt=0, description="a transfer not landed this long after its prefill ended fails (waits for blocks count)"
    )
    tick_ms: float = Field(5.0, gt=0, description="how often the two sides are brought to the same time while busy")
    failure_rate: float = Field(0, ge=0, le=1, description="share of transfers that fail (seeded): chaos testing")
    failure_seed: int = Field(0, description="seed of the injected transfer failures")
    on_failure: PdFailure = Field(PdFailure.LOCAL_PREFILL, description="local_prefill | error: after a failed transfer")
    release_reservation_on_abort: bool = Field(
        True, description="off only to build a broken target: an abort leaves the decode reservation held"
    )
    resolve_failed_transfers: bool = Field(
        True, description="off only to build a broken target: a failed or timed-out transfer is never resolved"
    )


class TenantConfig(ConfigTable):
    api_keys: list[str] = Field(min_length=1, description="Bearer keys that identify the tenant")
    traffic_class: TrafficClass = Field(
        TrafficClass.INTERACTIVE, description="system | interactive | batch: the only source of priority"
    )
    max_kv_share: float = Field(0.15, gt=0, le=1, description="hard cap on live KV share of the pool")
    max_active_seqs: int = Field(128, ge=1, description="queued + running requests at most")
    max_reserved_tokens: int = Field(4_000_000, ge=1, description="input used + output still allowed")
    max_context_tokens: int | None = Field(
        None, ge=1, description="prompt + max_tokens per request (default: the model's)"
    )
    rebuildable_sessions: bool = Field(True, description="an expired session is rebuilt (re-prefilled) instead of 410")
    permission_version: int = Field(0, ge=0, description="bump to invalidate this tenant's cached prefixes")


class PublicPrefix(ConfigTable):
    """A prompt prefix that may be shared across tenants (e.g. a common system prompt)."""

    name: str = Field(description="label in logs and the ledger")
    text: str = Field(description="the prefix text; matched as raw text or as a chat system message")
    pinned: bool = Field(False, description="load at warm-up and never evict (capped by pinned_max_percent)")


class PrefixCacheConfig(ConfigTable):
    """Prefix caching: chained block hashes (keyed with a secret of the engine), tenant-scoped
    unless declared public."""

    enabled: bool = Field(True, description="off: no block is ever shared")
    sharing: PrefixSharing = Field(
        PrefixSharing.TENANT,
        description="who may hit whose cached blocks: tenant (a tenant's own, per cache_salt), "
        "salt (all tenants' unsalted blocks; a cache_salt isolates: vLLM's behaviour) or global "
        "(every block, cache_salt ignored: an engine without salts). Anything but tenant lets one "
        "tenant time another's prompts",
    )
    public_prefixes: list[PublicPrefix] = Field([], description="see [[prefix_cache.public_prefixes]]")


DEV_ADMIN_KEY = "sk-kvgate-admin"
"""The admin key of a local dev run (`kvgate serve --dev`): public, so refused anywhere else."""
ADMIN_KEY_VAR = "KVGATE_ADMIN_KEY"
"""The environment variable that gives `kvgate serve` its admin key (wins over the config's)."""


class ServerConfig(ConfigTable):
    """The HTTP server (`kvgate serve`)."""

    admin_key: str | None = Field(
        None,
        min_length=1,
        description="Bearer key of the /admin API (a secret: "
        "redacted wherever the config is shown). `kvgate serve` refuses to start "
        "without one (here or in KVGATE_ADMIN_KEY) unless --dev",
    )
    metrics_key: str | None = Field(
        None,
        min_length=1,
        description="Bearer key that opens the full /metrics, "
        "per-tenant families included (a secret; the admin key opens it too). Unset: "
        "/metrics is open and leaves out every family labelled by tenant; set: "
        "/metrics without a key is 401",
    )
    served_model_name: str = Field("", description="model id clients send (default: model.name)")
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="larger bodies get 413")
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="a connection that has not sent a whole request line "
        "and headers this long after it opened (or began a request) gets 408 and is "
        "closed: slow-header clients cannot hold connections",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="a request body not complete this long after its headers gets 408 and the connection is closed",
    )
    max_connections: int = Field(
        2048,
        ge=1,
        description="open client connections at most; one more is answered 503 too_many_connections and closed",
    )
    worker_hang_timeout_s: float = Field(
        5.0,
        gt=0,
        description="multi-worker mode: a worker that has not answered "
        "the router's health probe (every worker_probe_interval_s) for this long is "
        "hung: killed, its streams end with worker_lost, and it is replaced",
    )
    worker_probe_interval_s: float = Field(
        0.5, gt=0, description="multi-worker mode: seconds between the router's health probes of each worker"
    )
    orphan_check_interval_s: float = Field(5.0, gt=0, description="period of the orphan-block reconciliation")
    sample_interval_s: float = Field(0.5, gt=0, description="period of usage samples")
    cancel_propagation: bool = Field(True, description="abort on disconnect; off only to build a broken target")
    release_reservations_on_worker_loss: bool = Field(
        True, description="the router drops a dead worker's reservations; off only to build a broken target"
    )
    workers: int = Field(
        0,
        ge=0,
        description="engine worker processes behind a router (`kvgate serve --workers` overrides it); "
        "0: one engine in the server's own process",
    )
    routing: RoutingPolicyName = Field(
        RoutingPolicyName.LEAST_LOADED,
        description="multi-worker mode: least_loaded | round_robin | prefix_aware (cached prefix blocks, "
        "known from the workers' KV events: needs [kv_events] enable_kv_cache_events)",
    )
    kv_overlap_score_weight: float = Field(
        1.0,
        ge=0,
        description="prefix_aware: what one prefix block a worker already holds is worth against one "
        "block reserved on it (Dynamo's name); 0 routes by load alone",
    )
    route_only_to_ready_workers: bool = Field(
        True, description="the router skips workers that are dead or starting; off only to build a broken target"
    )
    end_only_lost_worker_streams: bool = Field(
        True,
        description="a worker's death ends the streams in flight on it and no others; off only to build a "
        "broken target (every stream the router relays ends)",
    )


class KvEventsConfig(ConfigTable):
    """KV cache events: what the prefix cache stored and evicted, published as vLLM publishes them
    (`--kv-events-config`: msgpack batches on a ZMQ PUB socket). The router of a prefix_aware
    fleet subscribes to its workers' events; `kvgate run --kv-events` reads them like vLLM's.
    Their token ids are prompt content: the endpoint stays on loopback unless you say otherwise."""

    enable_kv_cache_events: bool = Field(False, description="publish the events")
    publisher: KvEventsPublisher = Field(KvEventsPublisher.ZMQ, description="zmq | null (collect, publish nothing)")
    endpoint: str = Field(
        "tcp://127.0.0.1:5557",
        pattern=r"^tcp://[^:/\s]+:[0-9]{1,5}$",
        description="where the PUB socket binds; worker i of a router binds port + i (vLLM's offset per "
        "data-parallel rank); port 0: a free port each (named in /admin/workers)",
    )
    topic: str = Field("", description="the topic frame of every message")


class SimConfig(ConfigTable):
    """Roofline efficiency constants; `profile` points at a file written by `kvgate calibrate`."""

    mfu: float = Field(0.65, gt=0, le=1, description="model FLOPs utilisation of prefill")
    mbu: float = Field(0.70, gt=0, le=1, description="memory bandwidth utilisation of decode")
    step_overhead_ms: float = Field(1.7, ge=0, description="fixed cost of every step")
    profile: str = Field("", description="TOML written by `kvgate calibrate`; overrides the three above")


class TorchTiming(str, Enum):
    MEASURED = "measured"  # a step lasts as long as it really ran (live serving, calibration)
    MODELED = "modeled"  # a step lasts what the sim time model says (deterministic tests, replay)


class TorchConfig(ConfigTable):
    """The torch executor: where the model runs and where its weights come from.

    The architecture (layers, heads, kv_heads, head_dim, hidden, intermediate, vocab) is the
    catalog entry of `model.name` and the dtypes are `model.weight_dtype` / `model.kv_dtype`, so
    the memory plan and the tensors the executor allocates are computed from the same figures.
    A `checkpoint` must match that entry; its own config.json then supplies rope and norm."""

    device: str = Field("cpu", pattern=r"^(cpu|cuda(:[0-9]+)?)$")
    checkpoint: str = Field("", description="local Hugging Face model directory; empty: seeded random weights")
    rope_theta: float = Field(10_000.0, gt=0, description="random weights only")
    norm_eps: float = Field(1e-5, gt=0, description="random weights only")
    timing: TorchTiming = TorchTiming.MEASURED
    cpu_threads: int = Field(
        0,
        ge=0,
        description="torch threads on CPU (process-wide); 0: torch's default. "
        "1 is steadiest on a small machine shared with the server",
    )
    record_attention: bool = Field(False, description="return per-token attention mass (always on for h2o)")
    disk_tier_dir: str = Field(
        "",
        description="where the disk KV tier's files go: the executor makes its own directory "
        "inside and removes it on close; empty: the system temporary directory",
    )


class EngineConfig(ConfigTable):
    model: ModelConfig = ModelConfig()
    hardware: HardwareConfig = HardwareConfig()
    binding: BindingConfig = BindingConfig()
    engine: EngineSection = EngineSection()
    kv_cache: KvCacheConfig = KvCacheConfig()
    admission: AdmissionConfig = AdmissionConfig()
    preemption: PreemptionConfig = PreemptionConfig()
    prefix_cache: PrefixCacheConfig = PrefixCacheConfig()
    tiers: TiersConfig = TiersConfig()
    tenants: dict[str, TenantConfig] = {}
    server: ServerConfig = ServerConfig()
    kv_events: KvEventsConfig = KvEventsConfig()
    pd: PdConfig = PdConfig()
    sim: SimConfig = SimConfig()
    torch: TorchConfig = TorchConfig()
    lru: LruConfig = LruConfig()
    multi_queue: MultiQueueConfig = MultiQueueConfig()
    value_density: ValueDensityConfig = ValueDensityConfig()
    streamingllm: StreamingLlmConfig = StreamingLlmConfig()
    h2o: H2oConfig = H2oConfig()
    zones: ZonesConfig = ZonesConfig()

    @model_validator(mode="after")
    def _keys_unique(self) -> EngineConfig:
        seen: dict[str, str] = {}
        for name, tenant in self.tenants.items():
            for key in tenant.api_keys:
                if key in seen:  # the message never shows a key: it may end up in a log
                    raise ValueError(f"an api key of tenant {name!r} is also an api key of tenant {seen[key]!r}")
                if key == self.server.admin_key:
                    raise ValueError(f"tenant {name!r} uses the admin key as an api key")
                seen[key] = name
        return self
