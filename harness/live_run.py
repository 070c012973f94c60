"""One live run, end to end: target -> preflight -> baseline -> load -> cooldown -> record.

    result = run_live(plan, progress)       # plan: LivePlan; progress: anything with the 2 methods

Before the record begins, an external target's prompt cost is measured (harness/token_counts.py:
its /tokenize, else --tokenizer), so the scenarios' prompt sizes are its tokens; then its speed
(harness/target_speed.py), and unless the plan says otherwise the profile's load is sized to it
(harness/load_sizing.py): `meta.live.target_speed` and `meta.live.sizing` keep both.

Phases, on one clock (seconds since `meta.started_unix`, taken just before the baseline):

    baseline  a few sequential interactive requests, nothing else in flight (baseline.py)
    load      locust (locust_process.py) until it exits: the scenarios' users, from the first
              request sent; or an open loop (arrivals at a rate, a trace), from its schedule's
              time 0. Either on this host's processes or on workers of other hosts; what the
              master reports about them and the schedule is accounted for (load_report.py)
    cooldown  after the load: until the engine holds no request (bounded by cooldown_max_s), and
              at least cooldown_min_s, sampling all along, so memory fall-back can be judged

A profile may resize the simulated GPU for its load (`LivePlan.engine_overrides`, see
harness/profiles.py): the engine this run starts then runs the --policy config with those keys
changed, kept (secrets redacted) as `<run>/engine_config.json`, and `meta.live.engine_overrides`
says what changed. The engine gets the plan's admin key (a fresh one per run) through its
environment; no key is ever written under the run directory.

Collectors (harness/collectors/live.py) run across all three; behind a gateway they read each
replica as well (`LivePlan.replicas`, or the reference engine's workers when it runs several):
every replica answers a preflight of its own first, and the record gains replica_samples.csv,
replicas.csv and `meta.replica_collectors`. A trace's infinite-cache bound at the target's block
size goes to `meta.prefix_reuse` (harness/replay/reuse_bound.py). After the drain each tenant's KV
is estimated from the client's own requests (harness/collectors/tenant_estimate.py): the only
tenant view of a target without tenants, judged against `tenant_caps`, and beside the reference
engine's own count a check of the estimate. The record is complete even when
the run fails or is interrupted: the finally-block writes meta.json with what was measured and
a note saying what went wrong ("run ended early: ...": `kvgate gate` never judges, so never
passes, such a record); the reference engine, if this run started it, is stopped then.
Gates and the report run afterwards on the record alone (harness/commands/run.py).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from harness.baseline import run_baseline
from harness.collectors import tenant_estimate
from harness.collectors.admin import AdminApi
from harness.collectors.isolation import Isolation, ProbeOptions, probe_isolation
from harness.collectors.live import CollectorSettings, LiveCollectors
from harness.collectors.llamacpp_slots import DEFAULT_LAYOUT, KvLayout
from harness.collectors.replica_spec import ReplicaSpec, check_replicas, worker_replicas
from harness.collectors.tenant_estimate import PoolCapacity, record_tenant_estimate
from harness.live_meta import engine_config_of, live_meta
from harness.load_report import account_for, missing_workers, read_load_report
from harness.load_sizing import PlannedLoad, size_load
from harness.loadgen.load_workers import LOAD_JSON_FILE
from harness.loadgen.request_log import tally
from harness.loadgen.schedule import Workload
from harness.loadgen.settings import LoadSettings
from harness.loadgen.tenants import TenantSet, parse_tenants
from harness.loadgen.trace_workload import TraceWorkload
from harness.locust_process import LocustProcess, Master, RowTail, locust_command
from harness.preflight import preflight
from harness.replay.reuse_bound import prefix_reuse
from harness.scenario_catalog import Scenario
from harness.target import ReferenceEngine, Target, external_target
from harness.target_speed import SpeedNotMeasuredError, measure_speed
from harness.token_counts import MeasuredTokens, measure_tokens
from record.errors import KvgateError
from record.fleet import PD_TARGET
from record.pressure import record_pressure
from record.run_record import ENDED_EARLY, CollectorStatus, Phase, PrefixReuse, RunMeta, RunRecord, RunRecordWriter
from reference_engine import EngineConfig
from reference_engine.config import save_config

TAIL_INTERVAL_S = 0.5
ENGINE_CONFIG_FILE = "engine_config.json"
EXIT_MARGIN_S = 60.0
DRAIN_MARGIN_S = 10.0
"""An open loop waits for its last answers up to a request timeout and this after its last send."""
FAST_POLL_SCENARIOS = frozenset({"cancel_storm"})
"""Scenarios whose release latency an outside target's metrics must show to within tens of ms."""


class LocustFailed(KvgateError):
    """The load generator itself failed (not the target): a harness error."""


class WorkersMissing(KvgateError):
    """A master whose workers never came (or were refused): the run never began."""


class RunProgress(Protocol):
    def phase(self, name: str, detail: str = "") -> None: ...

    def load(self, elapsed_s: float, total_s: float, counts: Mapping[str, int], usage: float | None) -> None: ...


@dataclass(frozen=True)
class FollowedLoad:
    """A load another process drives (a plain `locust` run, `kvgate watch`): its request rows
    arrive in `rows` (run-record columns, times counted from `origin_unix`), and it is over once
    `is_over()` says so."""

    rows: Path
    is_over: Callable[[], bool]
    origin_unix: float


@dataclass(frozen=True, kw_only=True)
class LivePlan:
    """Everything one live run needs, decided before it starts (the CLI builds it)."""

    run_dir: Path
    config: EngineConfig | None
    config_path: Path | None
    scenarios: list[Scenario]
    mixed_dir: Path | None  # the whole directory (the mixed default) instead of named scenarios
    settings: LoadSettings
    duration_s: float
    users: int
    spawn_rate: float
    processes: int = 0
    master: Master | None = None
    """Locust workers on other hosts, connecting to this master, instead of `processes` here."""
    engine_workers: int = 0
    target_url: str | None = None
    metrics_url: str | None = None
    baseline_requests: int = 5
    cooldown_max_s: float = 30.0
    cooldown_min_s: float = 2.0
    stop_timeout_s: float = 10.0
    sample_interval_s: float = 0.5
    profile: str = ""
    engine_overrides: Mapping[str, Any] = field(default_factory=dict)
    """Applied to `config` already (the profile's, for an engine this run starts); the engine
    is started with that config, saved beside the record as engine_config.json."""
    tokenizer: Path | None = None
    """A `tokenizers` file that counts the external target's tokens when it has no /tokenize."""
    label_policy: bool = False
    """On an external target: record `config` as what the target runs, as a label only (its
    name and digest; never its pool, watermarks or tenant caps, which are kvgate's, not the
    target's). Without it the config of an external run only supplies tenants, keys and model."""
    followed: FollowedLoad | None = None
    """Record a load that another process drives instead of starting locust (no baseline then)."""
    open_loop: Workload | None = None
    """An open loop (arrivals at a rate, a trace: what `settings` ask for, loadgen/workloads.py)
    instead of the scenarios' users; locust sends it all the same."""

    kv_events_endpoint: str = ""
    """vLLM's KV cache events: tcp://host:port to connect to, listen:tcp://host:port to bind, or none."""
    llamacpp_kv: KvLayout = DEFAULT_LAYOUT
    """How a llama.cpp target laid out its KV cache, which its endpoints do not say (llamacpp_slots.py)."""
    target_log: Path | None = None
    """The server's log, tailed during the run for OOM lines (harness/collectors/target_log.py)."""
    probes: ProbeOptions = ProbeOptions()
    """Isolation probes beyond the two in the GPU pool (`--probes tiers,timing`); the admin key
    and token model are the run's."""
    replicas: tuple[ReplicaSpec, ...] = ()
    """Behind the target (a gateway): each replica, read on its own (harness/collectors/fleet.py).
    Empty for a reference engine with several workers: its workers are found and read so."""
    isolation: Isolation | None = None
    """An earlier run's isolation probes, recorded as this run's with their note instead of
    probing again (a sweep probes once, before its first step); None: probe before the record."""
    tenant_caps: Mapping[str, float] = field(default_factory=dict)
    """On an external target: the KV share each tenant is held to, which the target itself does
    not enforce (tenant_share judges the client's estimate against them); the reference
    engine's caps are its config's."""
    size_to_target: bool = False
    """On an external target: size the load to its measured speed (harness/load_sizing.py)."""
    explicit: frozenset[str] = frozenset()
    """What the user set ("users", "duration_s", LoadSettings field names): sizing keeps them."""

    def __post_init__(self) -> None:
        assert self.isolation is None or self.isolation.note, "a repeated isolation result must say whose it is"

    def scenario_names(self) -> list[str]:
        return [self.open_loop.name] if self.open_loop is not None else [s.name for s in self.scenarios]


@dataclass(frozen=True)
class LiveResult:
    run_dir: Path
    meta: RunMeta
    isolation: Isolation
    """The isolation probes the record holds (a later run may repeat them: LivePlan.isolation)."""


def run_live(plan: LivePlan, progress: RunProgress) -> LiveResult:
    """The run, recorded. A run that fails before its record begins (the engine does not start,
    the preflight fails) leaves no directory it made behind: the error says what went wrong."""
    made_dir = not plan.run_dir.exists()
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    recording = False
    try:
        with ExitStack() as stack:
            progress.phase("target", plan.target_url or f"starting kvgate serve --config {plan.config_path}")
            if plan.target_url:
                target = external_target(plan.target_url, plan.metrics_url)
            else:
                target = stack.enter_context(
                    ReferenceEngine(
                        _engine_config_path(plan, stack),
                        admin_key=plan.settings.admin_key,
                        workers=plan.engine_workers,
                        log_path=plan.run_dir / "engine.log",
                    )
                )
                if _serves_pd(plan):  # its two pools are judged apart (gates/fleet.py)
                    target = replace(target, kind=PD_TARGET)
            tenants = TenantSet(parse_tenants(plan.settings.tenants))
            progress.phase("preflight", target.url)
            checked = preflight(target.url, key=tenants.all[0].key, model=plan.settings.model)
            plan = replace(plan, replicas=_replicas(plan, target, tenants.all[0].key, progress))
            settings = plan.settings.with_(model=checked.model)
            tokens, sizing = None, Sizing()
            if plan.target_url and plan.followed is None:  # a followed load sized its prompts itself
                progress.phase("tokens", "what a prompt costs in the target's tokens")
                tokens = measure_tokens(
                    target.url,
                    key=tenants.all[0].key,
                    model=checked.model,
                    system_prompt=settings.system_prompt,
                    tokenizer=plan.tokenizer,
                )
                settings = settings.with_(token_model=tokens.model.spec() if tokens else "")
                plan, settings, sizing = _size_to_target(plan, settings, target.url, tenants.all[0].key, progress)
            recording = True
            return _record(plan, settings, target, tenants, progress, stack, tokens, sizing)
    except BaseException:
        if made_dir and not recording:
            shutil.rmtree(plan.run_dir, ignore_errors=True)
        raise


def _serves_pd(plan: LivePlan) -> bool:
    """Whether the engine this run starts is a P/D pair: its two sides are the replicas."""
    return not plan.target_url and plan.config is not None and plan.config.pd.enabled


def _replicas(plan: LivePlan, target: Target, key: str, progress: RunProgress) -> tuple[ReplicaSpec, ...]:
    """The replicas to read: the plan's, each answering where it is read (a replica that does
    not is a harness error naming it), or the workers of a reference engine that runs several,
    or the two sides of its P/D pair."""
    if plan.replicas:
        progress.phase("replicas", ", ".join(r.name for r in plan.replicas))
        check_replicas(plan.replicas, key)
        return plan.replicas
    if plan.target_url or (plan.engine_workers < 2 and not _serves_pd(plan)):
        return ()
    admin = AdminApi(target.url, plan.settings.admin_key)
    try:
        return worker_replicas(admin)
    finally:
        admin.close()


@dataclass(frozen=True)
class Sizing:
    """What timing the target and sizing the load to it leave for the record."""

    live: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _size_to_target(
    plan: LivePlan, settings: LoadSettings, url: str, key: str, progress: RunProgress
) -> tuple[LivePlan, LoadSettings, Sizing]:
    """Time the target; unless the plan says otherwise, size its load to that speed. A target
    whose probes are not served runs unsized, for its gates to judge."""
    progress.phase("speed", "timing a short and a long prompt, then a few at once, alone on the target")
    try:
        speed = measure_speed(url, key=key, model=settings.model, tokens=settings.tokens)
    except SpeedNotMeasuredError as err:
        why = f"the load was not sized to the target: its speed was not measured ({err})"
        progress.phase("sizing", why)
        return plan, settings, Sizing({"target_speed": {"measured": False, "detail": str(err)}}, [why])
    live: dict[str, Any] = {"target_speed": {"measured": True, **speed.to_dict()}}
    if not plan.size_to_target:
        return plan, settings, Sizing(live)
    sized = size_load(_planned(plan, settings), speed)
    progress.phase("sizing", "; ".join((sized.describe(), *sized.warnings)))
    live["sizing"] = sized.to_dict()
    notes = [f"the {plan.profile} profile was {sized.describe()}"] if sized.changes else []
    plan = replace(plan, users=sized.users, duration_s=sized.duration_s, stop_timeout_s=sized.stop_timeout_s)
    return plan, sized.settings, Sizing(live, notes + list(sized.warnings))


def _planned(plan: LivePlan, settings: LoadSettings) -> PlannedLoad:
    return PlannedLoad(
        settings=settings,
        scenarios=tuple(plan.scenario_names()),
        users=plan.users,
        duration_s=plan.duration_s,
        stop_timeout_s=plan.stop_timeout_s,
        explicit=plan.explicit,
    )


def _engine_config_path(plan: LivePlan, stack: ExitStack) -> Path:
    """The file `kvgate serve` starts with: the --policy file, or the config with the profile's
    overrides applied. That one holds the tenants' keys, so it is written to a private temporary
    file, removed when the run ends; the run directory keeps it redacted (what ran, no secrets)."""
    assert plan.config_path is not None
    if not plan.engine_overrides:
        return plan.config_path
    assert plan.config is not None
    save_config(plan.config, plan.run_dir / ENGINE_CONFIG_FILE, redact=True)
    private = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kvgate-engine-"))) / ENGINE_CONFIG_FILE
    return save_config(plan.config, private)


def _record(
    plan: LivePlan,
    settings: LoadSettings,
    target: Target,
    tenants: TenantSet,
    progress: RunProgress,
    stack: ExitStack,
    tokens: MeasuredTokens | None,
    sizing: Sizing,
) -> LiveResult:
    isolation = plan.isolation
    if isolation is None:
        progress.phase("isolation", "can one tenant, or one cache_salt, hit another's cached prompt?")
        keys = [t.key for t in tenants.all]
        options = replace(plan.probes, admin_key=settings.admin_key, tokens=settings.tokens)
        isolation = probe_isolation(target.url, settings.model, keys, target.metrics_url, options)
    started_unix = time.time()  # after the probes: their engine events are not the run's
    writer = stack.enter_context(RunRecordWriter(plan.run_dir))
    fast_poll = any(s.name in FAST_POLL_SCENARIOS for s in plan.scenarios)
    collectors = LiveCollectors(
        CollectorSettings(
            base_url=target.url,
            metrics_url=target.metrics_url,
            admin_key=settings.admin_key,
            sample_interval_s=plan.sample_interval_s,
            api_key=tenants.all[0].key,
            fast_poll=fast_poll,
            kv_events_endpoint=plan.kv_events_endpoint,
            llamacpp_kv=plan.llamacpp_kv,
            target_log=plan.target_log,
            replicas=plan.replicas,
        ),
        writer,
        started_unix,
    )
    stack.callback(collectors.close)
    collectors.start()
    initial = collectors.initial_state()
    phases: list[Phase] = []
    live: dict[str, Any] = {
        "profile": plan.profile,
        "users": plan.users,
        "spawn_rate": plan.spawn_rate,
        "duration_s": plan.duration_s,
        "processes": plan.processes,
        "settings": settings.public(),
        "engine_overrides": dict(plan.engine_overrides),
    }
    notes: list[str] = [isolation.note] if isolation.note else []
    if plan.target_url and plan.followed is None:
        live["tokens"] = {"source": tokens.source if tokens else "kvgate words", "model": settings.token_model}
        if tokens is None:
            notes.append(
                "prompt sizes are the reference engine's words, not the target's tokens: it has no "
                "/tokenize and no --tokenizer was given"
            )
    live |= sizing.live
    notes += sizing.notes

    def clock() -> float:
        """The run's one clock: seconds since meta.started_unix."""
        return time.time() - started_unix

    try:
        if plan.baseline_requests:
            progress.phase("baseline", f"{plan.baseline_requests} sequential requests")
            b0 = clock()
            baseline = run_baseline(
                target.url,
                settings=settings,
                tenant=tenants.pick("interactive", 0),
                model=settings.model,
                num_requests=plan.baseline_requests,
            )
            writer.append("requests", [o.row(started_unix) for o in baseline])
            phases.append(Phase(name="baseline", start_s=b0, end_s=clock()))
        if plan.followed is None:
            load_start, load_end, counts, report = _load(
                plan, settings.with_(t0_unix=started_unix), target, writer, collectors, progress, clock, live
            )
        else:
            load_start, load_end, counts = _follow(
                plan.followed, writer, collectors, progress, clock, plan.followed.origin_unix - started_unix
            )
            report = _take_report(Path(settings.load_json)) if settings.load_json else None
        load_start = _account(plan, settings, report, started_unix, live, notes, load_start)
        phases.append(Phase(name="load", start_s=load_start, end_s=load_end))
        progress.phase("cooldown", "waiting for the engine to drain")
        live["drained"] = collectors.wait_drained(plan.cooldown_max_s)
        if not live["drained"]:
            notes.append(
                f"the target still held requests {plan.cooldown_max_s:.0f} s after the load "
                f"(or cannot say): cooldown ended at its limit"
            )
        time.sleep(max(0.0, load_end + plan.cooldown_min_s - clock()))
        phases.append(Phase(name="cooldown", start_s=load_end, end_s=clock()))
        live["requests"] = dict(counts)
    except BaseException as err:
        notes.append(
            f"{ENDED_EARLY}: {type(err).__name__}: {err}" if str(err) else f"{ENDED_EARLY}: {type(err).__name__}"
        )
        raise
    finally:
        collectors.stop()
        final = collectors.final_state()
        admin_config = collectors.engine_config
        named = plan.config if plan.target_url is None or plan.label_policy else None
        config, digest = engine_config_of(admin_config, named)
        is_label = admin_config is None and plan.target_url is not None and named is not None
        if is_label:
            notes.append(
                "policy and config digest are a label from --policy: the target's pool, watermarks and "
                "tenant caps are its own, unknown here, and nothing is judged against the file's"
            )
        snap = collectors.last_snapshot
        meta = live_meta(
            run_id=plan.run_dir.name,
            started_unix=started_unix,
            duration_s=clock(),
            config=config,
            digest=digest,
            config_path=str(plan.config_path or ""),
            scenarios=plan.scenario_names(),
            target={**target.describe(settings.model), "replicas": [r.describe() for r in plan.replicas]},
            num_blocks=snap["num_blocks"] if snap else None,
            phases=phases,
            signals=collectors.signals(),
            initial=initial,
            final=final,
            notes=collectors.notes + notes,
            gpu_name=collectors.gpu.name,
            live=live,
            config_is_label=is_label,
        )
        estimate = _estimate_tenants(plan, writer, meta, collectors)
        statuses = {**collectors.statuses(), **isolation.statuses, tenant_estimate.NAME: estimate}
        writer.append("replicas", collectors.replica_rows())
        meta = meta.model_copy(
            update={
                "collectors": statuses,
                "probes": isolation.probes,
                "replica_collectors": collectors.replica_statuses(),
                "prefix_reuse": _prefix_reuse(plan, meta, collectors),
            }
        )
        writer.write_meta(meta)
        meta = meta.model_copy(update={"pressure": record_pressure(plan.run_dir)})
    return LiveResult(plan.run_dir, meta, isolation)


def _estimate_tenants(
    plan: LivePlan, writer: RunRecordWriter, meta: RunMeta, collectors: LiveCollectors
) -> CollectorStatus:
    """Each tenant's KV share estimated from the client's requests (tenant_estimate.py), over
    the pool the engine's config or the target's /metrics states. Beside the reference engine's
    own count it shows how close the estimate comes; on other targets it is the only one."""
    if meta.pool is not None:
        pool: PoolCapacity | None = PoolCapacity(meta.pool.num_blocks, meta.pool.block_tokens, "the engine's pool")
    else:
        pool = collectors.stated_pool()
    caps = collectors.caps if collectors.admin is not None else dict(plan.tenant_caps)
    try:
        return record_tenant_estimate(plan.run_dir, writer, pool, caps)
    except Exception as err:  # the record is written whatever the estimate does (a collector's rule)
        return CollectorStatus(available=False, detail=f"the estimate failed: {type(err).__name__}: {err}")


def _prefix_reuse(plan: LivePlan, meta: RunMeta, collectors: LiveCollectors) -> PrefixReuse | None:
    """A trace's infinite-cache bound at the target's block size (the engine's, else what its
    metrics state); None for another load, or when the block size is unknown."""
    workload = plan.open_loop
    if not isinstance(workload, TraceWorkload):
        return None
    pool = collectors.stated_pool()
    block_tokens = meta.pool.block_tokens if meta.pool is not None else pool.block_tokens if pool else None
    if not block_tokens:
        return None
    trace = workload.trace.rescaled(rate_scale=workload.rate_scale, time_scale=workload.time_scale)
    trace = trace.resized(workload.size_scale)
    sent = [r for r in trace.requests if r.arrival_s < plan.duration_s][: workload.max_requests]
    return prefix_reuse(replace(trace, requests=sent), block_tokens)


def _load(
    plan: LivePlan,
    settings: LoadSettings,
    target: Target,
    writer: RunRecordWriter,
    collectors: LiveCollectors,
    progress: RunProgress,
    clock: Callable[[], float],
    live: dict[str, Any],
) -> tuple[float, float, Counter[str], dict[str, Any] | None]:
    """Run locust until it exits; copy its rows into the record as they come. Returns the load
    window (first request sent, locust exited), the request counts and the master's report. A
    master whose workers never came is a harness error that says how many it waited for
    (WorkersMissing)."""
    rows_path, report_path = plan.run_dir / "locust_requests.csv", plan.run_dir / LOAD_JSON_FILE
    settings = settings.with_(requests_csv=str(rows_path), phase="load", load_json=str(report_path))
    if plan.open_loop is not None:
        settings = settings.with_(schedule_s=plan.duration_s)
    cmd = locust_command(
        scenarios=plan.scenarios,
        mixed_dir=plan.mixed_dir,
        host=target.url,
        users=plan.users,
        spawn_rate=plan.spawn_rate,
        duration_s=plan.duration_s,
        stop_timeout_s=plan.stop_timeout_s,
        processes=plan.processes,
        html_path=plan.run_dir / "locust.html",
        open_loop=plan.open_loop is not None,
        master=plan.master,
    )
    live["locust_command"] = cmd
    progress.phase("load", f"{_what_loads(plan)}, {plan.duration_s:.0f} s")
    spawned = clock()
    tail, counts = RowTail(rows_path), Counter[str]()
    first_sent: float | None = None
    locust = LocustProcess(cmd, settings, plan.run_dir / "locust.log")
    try:
        deadline = spawned + _longest_load_s(plan, settings)
        while locust.wait(TAIL_INTERVAL_S) is None and clock() < deadline:
            first_sent = _copy_rows(tail, writer, counts, first_sent)
            usage = collectors.last_snapshot["usage"] if collectors.last_snapshot else None
            progress.load(clock() - spawned, plan.duration_s, counts, usage)
    finally:
        live["locust_exit_code"] = locust.stop()
        ended = clock()
        first_sent = _copy_rows(tail, writer, counts, first_sent)
        rows_path.unlink(missing_ok=True)
        report = _take_report(report_path)
    if plan.master is not None:
        why = missing_workers(report, expected=plan.master.expect_workers, waited_s=plan.master.wait_s)
        if why is not None:
            raise WorkersMissing(why)
    if live["locust_exit_code"] != 0:
        raise LocustFailed(f"locust exited with code {live['locust_exit_code']}; see {plan.run_dir / 'locust.log'}")
    return (first_sent if first_sent is not None else spawned), ended, counts, report


def _take_report(path: Path) -> dict[str, Any] | None:
    """The master's report, read and removed (what matters of it goes into meta.json)."""
    report = read_load_report(path)
    path.unlink(missing_ok=True)
    return report


def _what_loads(plan: LivePlan) -> str:
    if plan.open_loop is not None:
        return f"open loop, {plan.open_loop.name}"
    shaped = plan.mixed_dir is None and any(s.name == "step_load" for s in plan.scenarios)
    return "the step-load shape" if shaped else f"{plan.users} users"


def _longest_load_s(plan: LivePlan, settings: LoadSettings) -> float:
    """How long locust may take before it is stopped: the load, its stop (an open loop: its
    drain, up to a request timeout after the last send), waiting for workers, and a margin."""
    drain_s = settings.request_timeout_s + DRAIN_MARGIN_S if plan.open_loop is not None else 0.0
    workers_s = plan.master.wait_s if plan.master is not None else 0.0
    return plan.duration_s + drain_s + plan.stop_timeout_s + workers_s + EXIT_MARGIN_S


def _account(
    plan: LivePlan,
    settings: LoadSettings,
    report: dict[str, Any] | None,
    started_unix: float,
    live: dict[str, Any],
    notes: list[str],
    load_start: float,
) -> float:
    """What the master reported about who sent the load (and an open loop's schedule) into
    meta.live and the notes (load_report.py). Returns the load's start: an open loop's begins
    at its schedule's time 0."""
    rows = RunRecord.table(plan.run_dir, "requests")
    account = account_for(
        report,
        rows[rows["phase"] == "load"],
        max_lag_ms=settings.max_lag_ms,
        max_in_flight=settings.max_in_flight,
    )
    live |= account.live
    notes += account.notes
    return account.origin_unix - started_unix if account.origin_unix is not None else load_start


def _follow(
    load: FollowedLoad,
    writer: RunRecordWriter,
    collectors: LiveCollectors,
    progress: RunProgress,
    clock: Callable[[], float],
    shift_s: float,
) -> tuple[float, float, Counter[str]]:
    """Copy a followed load's rows into the record, moved onto its clock (`shift_s`: the rows'
    origin minus the record's), until the load is over. Returns the load window (first request
    sent, or when following began; when it was over) and the request counts."""
    progress.phase("load", f"following {load.rows}")
    began, tail, counts = clock(), RowTail(load.rows), Counter[str]()
    first_sent: float | None = None

    def copy() -> float | None:
        return _copy_rows(tail, writer, counts, first_sent, shift_s)

    while not load.is_over():
        first_sent = copy()
        usage = collectors.last_snapshot["usage"] if collectors.last_snapshot else None
        progress.load(clock() - began, 0.0, counts, usage)
        time.sleep(TAIL_INTERVAL_S)
    ended = clock()
    first_sent = copy()
    return (first_sent if first_sent is not None else began), ended, counts


TIME_COLUMNS = ("sent_s", "first_token_s", "done_s", "intended_s")


def _copy_rows(
    tail: RowTail, writer: RunRecordWriter, counts: Counter[str], first_sent: float | None, shift_s: float = 0.0
) -> float | None:
    rows = tail.read()
    if shift_s:
        for row in rows:
            for column in TIME_COLUMNS:
                if row.get(column) not in (None, ""):
                    row[column] = float(row[column]) + shift_s
    if rows:
        writer.append("requests", rows)
        tally(counts, rows)
        for row in rows:
            sent = float(row["sent_s"])
            first_sent = sent if first_sent is None else min(first_sent, sent)
    return first_sent
