"""Gate truth (every gate must be shown to fail on a configuration built to break it, or it
proves nothing): the scenarios that drive default.toml and the broken configs, and the runs that
judge them.

Two mechanisms, each with its scenarios:

- **replay** (fast, deterministic, virtual clock): a synthetic trace built here, replayed through
  the engine core by `harness.replay.run.run_replay`, which writes the same run record a live
  run does. Used wherever the gate's signal exists without HTTP: OOM, tenant shares, engine
  TTFT, preemption, usage samples, evictions, batch waits.
- **live** (real HTTP, locust, bounded): `harness.live_run.run_live` against `kvgate serve`,
  for signals only a live target has: client disconnects (cancel), client timeouts (hangs),
  a bounded cooldown after clients left, worker kill -9.

A scenario may resize the simulated engine (`overrides`, applied to default.toml and the broken
config alike, as the CI profiles do) or give tenants a larger share where the pressure it needs
cannot exist under six 15 % tenants (their caps sum to 90 %, below the preempt rung); a broken
config differs from default.toml in the one setting that breaks its gate, and nothing else.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gates import Verdict, evaluate, load_thresholds
from harness.cli import build_parser
from harness.collectors.isolation import ProbeOptions
from harness.commands.run import build_plan
from harness.live_run import run_live
from harness.profiles import PRESSURE_MACHINE
from harness.replay.pd import PdChaos, run_pd_replay
from harness.replay.run import ReplaySettings, run_replay
from harness.replay.tenants import make_assigner
from harness.replay.trace import Trace, TraceRequest
from record.run_record import RunRecord
from reference_engine import EngineConfig, load_config, with_overrides

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "configs" / "default.toml"
PD_CONFIG = REPO / "configs" / "pd.toml"
BROKEN_DIR = REPO / "configs" / "broken"
TRACE_BLOCK_TOKENS = 512  # tokens per prefix id, as in the Mooncake trace


# ------------------------------------------------------------------ synthetic traces
@dataclass(frozen=True, slots=True)
class Send:
    """One request of a synthetic trace. `session` continues a conversation: its prompt starts
    with the session's earlier prompts (the same prefix ids), so a kept session is reused."""

    t_s: float
    tenant: str
    prompt_tokens: int
    output_tokens: int
    session: str | None = None


class TraceBuilder:
    """Synthetic traces whose every request goes to a chosen tenant.

    Replay assigns tenants itself (traces have none); with `hash:<tenants>;depth=1` the tenant
    is a function of a request's first prefix id, so each tenant gets a first id that hashes to
    it (found by asking the same assigner), and every prompt of that tenant starts with it: one
    512-token block the tenant's requests share, like a tenant system prompt. The other ids are
    fresh per request, or a session's own, growing with each turn."""

    def __init__(self, config: EngineConfig, tenants: tuple[str, ...]) -> None:
        self.spec = f"hash:{','.join(tenants)};depth=1"
        assigner = make_assigner(self.spec, config)
        self._first_id: dict[str, int] = {}
        candidate = 1
        while len(self._first_id) < len(tenants):
            probe = TraceRequest(
                row=0, arrival_s=0.0, num_prompt_tokens=1, num_output_tokens=1, prefix_ids=(candidate,)
            )
            self._first_id.setdefault(assigner.assign(probe), candidate)
            candidate += 1
        self._next_id = 1_000_000
        self._sessions: dict[str, list[int]] = {}

    def _fresh(self, n: int) -> list[int]:
        ids = list(range(self._next_id, self._next_id + n))
        self._next_id += n
        return ids

    def _ids(self, send: Send) -> tuple[int, ...]:
        num = math.ceil(send.prompt_tokens / TRACE_BLOCK_TOKENS)
        if send.session is None:
            return (self._first_id[send.tenant], *self._fresh(num - 1))
        history = self._sessions.setdefault(send.session, [self._first_id[send.tenant]])
        history.extend(self._fresh(max(0, num - len(history))))
        return tuple(history[:num])

    def build(self, sends: list[Send]) -> Trace:
        ordered = sorted(sends, key=lambda s: s.t_s)
        requests = [
            TraceRequest(
                row=i + 1,
                arrival_s=s.t_s - ordered[0].t_s,
                num_prompt_tokens=s.prompt_tokens,
                num_output_tokens=s.output_tokens,
                prefix_ids=self._ids(s),
                session_id=s.session,
            )
            for i, s in enumerate(ordered)
        ]
        return Trace(
            format="synthetic",
            source=Path("synthetic"),
            requests=requests,
            prefix_block_tokens=TRACE_BLOCK_TOKENS,
            num_rows=len(requests),
        )


def every(period_s: float, until_s: float, start_s: float = 0.0) -> Iterator[float]:
    """start, start + period, ... below until."""
    n = 0
    while (t := start_s + n * period_s) < until_s:
        yield t
        n += 1


@dataclass(frozen=True)
class ReplayScenario:
    """A synthetic trace (built against the config it runs on) and what it resizes."""

    name: str
    sends: Callable[[], list[Send]]
    overrides: Mapping[str, Any] = field(default_factory=dict)
    pd_chaos: PdChaos = PdChaos()  # what the replay of a P/D pair does to its transfers

    def tenants(self) -> tuple[str, ...]:
        return tuple(sorted({s.tenant for s in self.sends()}))


def _overload() -> list[Send]:
    # Three tenants send a 16K-token prompt with a 2K-token answer every 0.25 s, and umbrella
    # bursts twelve at once: 60 × 18K tokens ≈ 1.1M tokens against a 432K-token pool.
    sends = [Send(t, tenant, 16_384, 2_048) for tenant in ("acme", "globex", "initech") for t in every(0.25, 4.0)]
    sends += [Send(2.0 + 0.001 * i, "umbrella", 16_384, 2_048) for i in range(12)]
    return sends


def _batch_flood() -> list[Send]:
    # A batch job of 48K tokens every 2 s beside one short chat question every 0.1 s.
    sends = [Send(t, "batchco", 48_000, 16) for t in every(2.0, 30.0)]
    sends += [Send(t, "acme", 200, 32) for t in every(0.1, 30.0, start_s=0.05)]
    return sends


def _interactive_flood() -> list[Send]:
    # Chat questions (1K tokens, half of it the tenant's shared block) at 200/s over four tenants
    # for 45 s: more than the engine starts, so interactive work waits at every step, ahead of
    # batch by priority, hundreds deep; a batch job arrives every 2 s. The flood outlasts a batch
    # job's queue deadline (30 s): without starvation protection batch waits it out.
    tenants = ("acme", "globex", "initech", "umbrella")
    sends = [Send(t, tenants[i % 4], 1_024, 4) for i, t in enumerate(every(0.005, 45.0))]
    sends += [Send(t, "batchco", 1_024, 32) for t in every(2.0, 16.0, start_s=1.0)]
    return sends


def _decode_growth() -> list[Send]:
    # 120 requests whose prompts are small and answers long: admitted on their prompts, they
    # outgrow the pool while decoding, so running work must be preempted.
    return [Send(0.02 * i, ("acme", "globex")[i % 2], 1_000, 4_000) for i in range(120)]


def _many_sessions() -> list[Send]:
    # A new three-turn conversation every 0.1 s; turns 5 s apart, each adding 2K tokens. Kept
    # until their idle timeout (120 s), the sessions pile up far past the pool.
    sends = []
    for i, t in enumerate(every(0.1, 25.0)):
        sends += [Send(t + 5.0 * turn, "acme", 2_048 * (turn + 1), 64, session=f"s{i}") for turn in range(3)]
    return sends


def _conversations() -> list[Send]:
    # 40 conversations over four tenants, a turn every 2 s for 20 s, each adding 256 tokens: at
    # most 40 × 3K tokens ≈ 7,500 blocks of sessions, inside every tenant's cap and the pool.
    tenants = ("acme", "globex", "initech", "umbrella")
    return [
        Send(0.05 * i + 2.0 * turn, tenants[i % 4], 512 + 256 * turn, 32, session=f"c{i}")
        for i in range(40)
        for turn in range(10)
    ]


def _chat_rush() -> list[Send]:
    # Chat at 16 questions/s over four tenants for 20 s: 1K-token prompts (half of it the tenant's
    # shared block) and 512-token answers, ~9 s in flight, so each tenant has ~36 requests'
    # worst-case reservations (106 blocks each) at once: just inside its 15 % cap of 4,049 blocks
    # (the odd refusal at the cap), eight times a 2 % cap.
    tenants = ("acme", "globex", "initech", "umbrella")
    return [Send(t, tenants[i % 4], 1_024, 512) for i, t in enumerate(every(1 / 16, 20.0))]


def _long_chats() -> list[Send]:
    # Chat questions with 2.5K-4K-token prompts (critical: within the [slo] bound), five a second
    # for 10 s: longer than streamingllm's window of sinks + 2,048 tokens and h2o's 2,048 before
    # it compresses, so a token-level policy answers them from dropped KV.
    tenants = ("acme", "globex", "initech", "umbrella")
    return [Send(t, tenants[i % 4], 2_500 + 250 * (i % 7), 64) for i, t in enumerate(every(0.2, 10.0))]


def _recompute_pressure() -> list[Send]:
    # decode_growth's 120 requests (1K-token prompts, 4K-token answers) from two tenants that may
    # each take the whole pool: admission lets in more than the pool can grow into, so decodes
    # preempt one another over and over.
    return [Send(0.02 * i, ("acme", "globex")[i % 2], 1_000, 4_000) for i in range(120)]


def _tier_chaos() -> list[Send]:
    # 48 two-turn conversations over four tenants: 16K-token first turns, then each one back 40 s
    # later with 512 tokens more. The 780K tokens of first turns overflow the 432K-token pool, so
    # the idle conversations are evicted to the tiers the scenario adds, and their second turns
    # find their prefixes there: in a small host, or on a disk whose read link is cut tenfold
    # (16K tokens take 3.6 s to load, longer than re-prefilling them), with a quarter of the
    # loads arriving corrupt.
    tenants = ("acme", "globex", "initech", "umbrella")
    return [
        Send(0.25 * i + 40.0 * turn, tenants[i % 4], 16_384 + 512 * turn, 32, session=f"t{i}")
        for i in range(48)
        for turn in range(2)
    ]


TIER_CHAOS = {
    "tiers.host_gib": 4.0,
    "tiers.disk_gib": 256.0,
    "tiers.disk_read_gbps": 0.6,
    "tiers.max_write_backlog_ms": 5000,
    "tiers.load_failure_rate": 0.25,
}


def _pd_chat() -> list[Send]:
    # Chat at 20 questions/s over four tenants for 6 s on a P/D pair: 2K-token prompts (a quarter
    # the tenant's shared block) and 768-token answers, which fill the decode pool to its evict
    # rung; every prompt's KV crosses a 2 GB/s link in about 0.1 s, so a cancel timed to a
    # transfer's start lands mid-transfer.
    tenants = ("acme", "globex", "initech", "umbrella")
    return [Send(t, tenants[i % 4], 2_048, 768) for i, t in enumerate(every(1 / 20, 6.0))]


# Each side the quick profile's machine (its pool and batch), four tenants that may fill it, so
# the watermarks are what stops them; a slow link whose transfers fail one time in ten (its
# backlog keeps the prefill side's blocks pinned), every fourth transfer cancelled as it starts.
PD_CHAOS = {
    "engine.max_num_seqs": PRESSURE_MACHINE["engine.max_num_seqs"],
    "pd.prefill": {"hardware.kv_pool_gib": PRESSURE_MACHINE["hardware.kv_pool_gib"]},
    "pd.decode": {"hardware.kv_pool_gib": PRESSURE_MACHINE["hardware.kv_pool_gib"]},
    **{f"tenants.{name}.max_kv_share": 1.0 for name in ("acme", "globex", "initech", "umbrella")},
    "pd.link_gbps": 2.0,
    "pd.failure_rate": 0.1,
    "pd.failure_seed": 3,
}


REPLAY_SCENARIOS: dict[str, ReplayScenario] = {
    s.name: s
    for s in (
        ReplayScenario("overload", _overload),
        ReplayScenario("batch_flood", _batch_flood),
        ReplayScenario("interactive_flood", _interactive_flood),
        # six 15 % tenants can never reach the preempt rung (92 %): here two may take 60 % each
        ReplayScenario(
            "decode_growth", _decode_growth, {"tenants.acme.max_kv_share": 0.6, "tenants.globex.max_kv_share": 0.6}
        ),
        # one tenant may fill the pool, so the watermarks, not its cap, must stop it
        ReplayScenario("many_sessions", _many_sessions, {"tenants.acme.max_kv_share": 1.0}),
        ReplayScenario("conversations", _conversations),
        ReplayScenario("chat_rush", _chat_rush),
        ReplayScenario("long_chats", _long_chats),
        ReplayScenario("tier_chaos", _tier_chaos, TIER_CHAOS),
        ReplayScenario("pd_transfer_chaos", _pd_chat, PD_CHAOS, PdChaos(cancel_every=4)),
        ReplayScenario(
            "recompute_pressure",
            _recompute_pressure,
            {"tenants.acme.max_kv_share": 1.0, "tenants.globex.max_kv_share": 1.0},
        ),
    )
}


def replay(config_path: Path, scenario: ReplayScenario, run_dir: Path) -> RunRecord:
    """`kvgate replay` of the scenario's trace on the config (with the scenario's overrides);
    a P/D pair's through harness/replay/pd.py, with the scenario's chaos on its transfers."""
    config = with_overrides(load_config(config_path), scenario.overrides)
    builder = TraceBuilder(config, scenario.tenants())
    trace = builder.build(scenario.sends())
    settings = ReplaySettings(tenants=builder.spec)
    if config.pd.enabled:
        run_pd_replay(trace, config, settings, run_dir, config_path=str(config_path), chaos=scenario.pd_chaos)
    else:
        run_replay(trace, config, settings, run_dir, config_path=str(config_path))
    return RunRecord.load(run_dir)


def judge(record: RunRecord) -> Verdict:
    return evaluate(record, load_thresholds())


def broken_config(gate: str) -> Path:
    return BROKEN_DIR / f"{gate}.toml"


def config_changes(path: Path, base: Path = DEFAULT_CONFIG) -> dict[str, Any]:
    """Dotted keys whose values differ from `base`'s (for the one-change check)."""

    def flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, Mapping):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    default = flat(load_config(base).model_dump(mode="json"))
    broken = flat(load_config(path).model_dump(mode="json"))
    return {k: v for k, v in broken.items() if default.get(k) != v}


# ---------------------------------------------------------------------------- live runs
@dataclass(frozen=True)
class LiveScenario:
    """A short, bounded `kvgate run` (in-process: the same LivePlan the CLI builds)."""

    name: str
    scenarios: str
    users: int
    duration_s: float
    settings: Mapping[str, Any]
    overrides: Mapping[str, Any] = field(default_factory=dict)
    workers: int = 0
    cooldown_max_s: float = 3.0
    probes: ProbeOptions = ProbeOptions()
    """Isolation probes beyond the two in the GPU pool, sent before the load."""


class _Quiet:
    """run_live's progress, unseen."""

    def phase(self, name: str, detail: str = "") -> None:
        pass

    def load(self, elapsed_s: float, total_s: float, counts: Mapping[str, int], usage: float | None) -> None:
        pass


TIMING_PROBE = ProbeOptions(timing=("cross_tenant",), timing_budget_s=1.0)  # the fewest rounds: MIN_ROUNDS


def probes_first(name: str, probes: ProbeOptions, overrides: Mapping[str, Any] | None = None) -> LiveScenario:
    """Isolation probes before a token load (one user, 1 s of 16-token answers): the probes are the test."""
    return LiveScenario(
        name,
        "long_output",
        users=1,
        duration_s=1.0,
        settings={"long_output_tokens": 16, "request_timeout_s": 10.0},
        overrides=overrides or {},
        probes=probes,
    )


# Prompts that share prefixes, for a fleet: a tenant's 3 documents of 400 words asked about again
# (shared_prefix), 600-word conversations whose every turn resends the last (multi_turn).
FLEET_PREFIX_LOAD = {
    "document_tokens": 400,
    "num_documents": 3,
    "session_context_tokens": 600,
    "long_session_fraction": 0.0,
    "turns": 4,
    "max_tokens": 16,
    "idle_gap_min_s": 0.2,
    "idle_gap_max_s": 0.5,
    "request_timeout_s": 30.0,
    "wait_min_s": 0.1,
    "wait_max_s": 0.3,
}

INTERACTIVE_TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka")

LIVE_SCENARIOS: dict[str, LiveScenario] = {
    s.name: s
    for s in (
        # Clients that hang up: cancel-storm users mid-prefill and mid-decode (a cancelled answer
        # would run on for 1,024 tokens, ~7 s), and 2,048-token answers (~13 s) that the end of the
        # load cuts off, so a deaf engine is still busy with them through the cooldown.
        LiveScenario(
            "hang_ups",
            "cancel_storm,long_output",
            users=8,
            duration_s=8.0,
            settings={
                "cancel_prompt_tokens": 2048,
                "cancel_max_tokens": 1024,
                "long_output_tokens": 2048,
                "request_timeout_s": 30.0,
                "wait_min_s": 0.1,
                "wait_max_s": 0.3,
            },
        ),
        # A queue: one sequence at a time (so a handful of users on two cores make one) and eight
        # users, each answer ~2.5 s. A request waits up to its queue deadline (8 s on default.toml)
        # and is then served in time for its client's 12 s timeout, or refused with 429
        # queue_deadline; a queue of seven takes ~17 s.
        LiveScenario(
            "queue",
            "long_output",
            users=8,
            duration_s=16.0,
            settings={"long_output_tokens": 384, "request_timeout_s": 12.0, "wait_min_s": 0.1, "wait_max_s": 0.3},
            overrides={"engine.max_num_seqs": 1},
        ),
        # Two workers, one killed every 3 s (three kills) while eight users stream ~6-second answers
        # from both: every kill finds requests in flight on its worker, even on a loaded machine
        # (with fewer, shorter answers a kill could land on a worker that held nothing).
        # Multi-turn conversations (600-word documents, six turns, idle 0.2-0.5 s) of eight users
        # on a 1,024-block pool whose tenants may each take it all: their idle sessions are
        # evicted to a small host tier and on to a disk, and come back from there, while
        # tier_chaos takes a step every 0.5 s: load failures on, reads cut tenfold, restored, the
        # disk detached, reattached, failures off.
        LiveScenario(
            "live_tier_chaos",
            "tier_chaos,multi_turn",
            users=9,
            duration_s=4.0,
            settings={
                "session_context_tokens": 5000,
                "long_session_fraction": 0.0,
                "unrebuildable_fraction": 0.0,
                "turns": 6,
                "prompt_tokens": 32,
                "max_tokens": 8,
                "idle_gap_min_s": 0.2,
                "idle_gap_max_s": 0.5,
                "tier_chaos_interval_s": 0.5,
                "tier_chaos_failure_rate": 0.75,
                "request_timeout_s": 20.0,
            },
            overrides={
                "hardware.kv_pool_gib": 4.0,
                "engine.max_num_seqs": 16,
                "engine.max_num_batched_tokens": 512,
                **{f"tenants.{t}.max_kv_share": 1.0 for t in INTERACTIVE_TENANTS},
                "tiers.host_gib": 0.25,
                "tiers.disk_gib": 4.0,
                "tiers.max_write_backlog_ms": 1000,
            },
        ),
        # The timing probe, then a token load: tenant A's cached prompts against fresh ones,
        # repeated by A and sent by tenant B, 24 rounds (~10 s on the sim engine); the same on an
        # engine without a prefix cache, where nobody can tell.
        probes_first("timing_probe", TIMING_PROBE),
        probes_first("timing_probe_uncached", TIMING_PROBE, {"prefix_cache.enabled": False}),
        # Both cached-token probes again with the prompt pushed down to the host tier, and to a
        # disk tier the scenario adds, before each repeat (the engine's /admin/tiers/offload).
        probes_first("tier_probes", ProbeOptions(tiers=True), {"tiers.disk_gib": 64.0}),
        # Two workers behind a prefix-aware router, users that share prefixes (FLEET_PREFIX_LOAD).
        LiveScenario(
            "fleet_prefixes",
            "shared_prefix,multi_turn",
            users=8,
            duration_s=10.0,
            workers=2,
            settings=FLEET_PREFIX_LOAD,
        ),
        # fleet_prefixes under router chaos: KV event batches dropped, delayed, the index emptied,
        # a step every second, and a worker killed every 4 s.
        LiveScenario(
            "fleet_chaos",
            "router_chaos,worker_kill,shared_prefix,multi_turn",
            users=10,
            duration_s=12.0,
            workers=2,
            settings={**FLEET_PREFIX_LOAD, "router_chaos_interval_s": 1.0, "kill_interval_s": 4.0},
        ),
        LiveScenario(
            "router",
            "worker_kill,long_output",
            users=9,
            duration_s=10.0,
            workers=2,
            settings={
                "long_output_tokens": 1024,
                "kill_interval_s": 3.0,
                "request_timeout_s": 30.0,
                "wait_min_s": 0.1,
                "wait_max_s": 0.3,
            },
        ),
    )
}


def live(config_path: Path, scenario: LiveScenario, run_dir: Path) -> RunRecord:
    """The plan `kvgate run --policy CONFIG --scenarios ... --profile full` builds, with the
    scenario's sizes and engine overrides, one baseline request and a short cooldown."""
    args = build_parser().parse_args(
        [
            "run",
            "--policy",
            str(config_path),
            "--profile",
            "full",
            "--scenarios",
            scenario.scenarios,
            "--users",
            str(scenario.users),
            "--spawn-rate",
            str(scenario.users),
            "--duration",
            str(scenario.duration_s),
            "--workers",
            str(scenario.workers),
            "--out",
            str(run_dir),
        ]
    )
    plan = build_plan(args)
    assert plan.config is not None
    plan = dataclasses.replace(
        plan,
        config=with_overrides(plan.config, scenario.overrides),
        engine_overrides=dict(scenario.overrides),
        settings=plan.settings.with_(**scenario.settings),
        baseline_requests=1,
        cooldown_min_s=1.0,
        cooldown_max_s=scenario.cooldown_max_s,
        stop_timeout_s=1,
        probes=scenario.probes,
    )
    run_live(plan, _Quiet())
    return RunRecord.load(run_dir)


# --------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Truth:
    """One row of the gate-truth table (docs/gates.md): the gate, the scenario that drives both
    default.toml and configs/broken/<gate>.toml, and what fails there."""

    gate: str
    scenario: str
    breaks: str
    healthy: Path = DEFAULT_CONFIG  # the config that passes under the same scenario
    broken_path: Path | None = None  # another config built to break it than configs/broken/<gate>.toml
    built_on: Path = DEFAULT_CONFIG  # the config the broken one changes in one setting

    @property
    def is_live(self) -> bool:
        return self.scenario in LIVE_SCENARIOS

    @property
    def broken(self) -> Path:
        return self.broken_path or broken_config(self.gate)


GATE_TRUTH: dict[str, Truth] = {
    t.gate: t
    for t in (
        Truth(
            "no_oom",
            "overload",
            "the `none` baseline starts everything it is sent and fails the batch when the pool runs out",
        ),
        Truth("cancel_release", "hang_ups", "cancelled answers run on for seconds, holding their blocks"),
        Truth("interactive_ttft", "batch_flood", "a 48K-token batch prefill takes whole steps; chat waits seconds"),
        Truth("tenant_share", "overload", "one tenant's burst takes about half the pool against its 15 % cap"),
        Truth("preempted_complete", "decode_growth", "preemption kills the victim instead of swapping or recomputing"),
        Truth("explicit_overflow", "queue", "queued requests outwait the clients' 12 s timeout: hangs"),
        Truth("memory_recovery", "hang_ups", "abandoned answers keep in-flight KV up through the cooldown"),
        Truth("memory_level_off", "many_sessions", "idle sessions fill the pool to 100 % instead of levelling off"),
        Truth("no_orphans", "router", "a killed worker's reservations stay in the router, held by nobody"),
        Truth(
            "eviction_thrash",
            "conversations",
            "each tenant keeps one idle session: ~7 % of the pool evicted per second",
        ),
        Truth(
            "batch_progress", "interactive_flood", "batch never starts behind the chat queue and waits out its deadline"
        ),
        Truth("goodput", "chat_rush", "caps of 2 % refuse most chat; the answered rest is fast"),
        Truth("rejections", "chat_rush", "caps of 2 % refuse most chat with tenant_quota"),
        Truth("approximate_answers", "long_chats", "streamingllm answers long chat questions from dropped KV"),
        Truth("recompute_tax", "recompute_pressure", "every preemption recomputes: a fifth of the compute"),
        Truth("capacity_after_drain", "hang_ups", "abandoned answers hold slots and blocks after the cooldown"),
        Truth("prefix_isolation", "hang_ups", "every block is shared: tenant B and salt B hit A's probe prompt"),
        Truth("prefix_timing", "timing_probe", "every block is shared: B's copy of A's prompt answers as fast as A's"),
        Truth("tier_loads", "tier_chaos", "loads from a cut disk link are waited for, corrupt ones served"),
        Truth("replica_kill", "router", "a replica's death ends the live replica's streams too"),
        Truth("unhealthy_routing", "router", "the dead replica, holding nothing, looks least loaded: work goes there"),
        Truth(
            "prefix_routing",
            "fleet_prefixes",
            "prefix_aware without KV events sees no cached block: recall 0",
            healthy=REPO / "configs" / "fleet.toml",
        ),
        Truth(
            "no_stranded_reservation",
            "pd_transfer_chaos",
            "an abort mid-transfer leaves the decode side's reserved blocks held by nobody (vLLM #46283)",
            healthy=PD_CONFIG,
            broken_path=BROKEN_DIR / "pd_stranded_reservation.toml",
            built_on=PD_CONFIG,
        ),
    )
}


# Gate truth beyond the table's one row per gate: the same gate under another scenario, often
# a live twin of a replayed one.
MORE_TRUTH: tuple[Truth, ...] = (
    Truth(
        "tier_loads",
        "live_tier_chaos",
        "a corrupt load is served while kvgate serve runs: loads fail, reads slow, the disk goes",
        healthy=REPO / "configs" / "tiered.toml",
    ),
    Truth(
        "prefix_isolation",
        "tier_probes",
        "the host tier's keys drop the salt: salt B loads what salt A left there",
        healthy=REPO / "configs" / "tiered.toml",
        broken_path=BROKEN_DIR / "prefix_isolation_tiers_no_salt.toml",
    ),
    Truth(
        "prefix_isolation",
        "tier_probes",
        "the host tier's keys drop the tenant: tenant B loads what tenant A left there",
        healthy=REPO / "configs" / "tiered.toml",
        broken_path=BROKEN_DIR / "prefix_isolation_tiers_no_tenant.toml",
    ),
    Truth(
        "prefix_routing",
        "fleet_chaos",
        "an index fed nothing stays blind; the healthy one, dropped, delayed and emptied, still finds prefixes",
        healthy=REPO / "configs" / "fleet.toml",
    ),
)


# The P/D pair's leaks (docs/pd.md), each judged on the pair's two pools: every gate a leak must fail.
PD_TRUTH: tuple[Truth, ...] = (
    *(
        Truth(
            gate,
            "pd_transfer_chaos",
            "an abort mid-transfer leaves the decode side's reserved blocks held by nobody (vLLM #46283)",
            healthy=PD_CONFIG,
            broken_path=BROKEN_DIR / "pd_stranded_reservation.toml",
            built_on=PD_CONFIG,
        )
        for gate in ("no_stranded_reservation", "cancel_release", "capacity_after_drain")
    ),
    *(
        Truth(
            gate,
            "pd_transfer_chaos",
            "a failed or timed-out transfer is never resolved: its request hangs, both pools keep its blocks",
            healthy=PD_CONFIG,
            broken_path=BROKEN_DIR / "pd_transfer_hang.toml",
            built_on=PD_CONFIG,
        )
        for gate in ("explicit_overflow", "capacity_after_drain")
    ),
)


def run_scenario(config_path: Path, scenario: str, run_dir: Path) -> RunRecord:
    if scenario in LIVE_SCENARIOS:
        return live(config_path, LIVE_SCENARIOS[scenario], run_dir)
    return replay(config_path, REPLAY_SCENARIOS[scenario], run_dir)


class RunCache:
    """Each (config, scenario) is run once per test module and judged once: the healthy
    default.toml run of a scenario serves every gate that scenario proves."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._verdicts: dict[tuple[Path, str], tuple[RunRecord, Verdict]] = {}

    def get(self, config_path: Path, scenario: str) -> tuple[RunRecord, Verdict]:
        key = (config_path, scenario)
        if key not in self._verdicts:
            record = run_scenario(config_path, scenario, self.root / f"{config_path.stem}-{scenario}")
            self._verdicts[key] = (record, judge(record))
        return self._verdicts[key]
