"""`kvgate run`: drive a target with the scenarios, record the run, judge it, report it.

    kvgate run --policy configs/multi_queue.toml                      # start the engine, mixed default
    kvgate run --policy configs/lru.toml --scenarios cancel_storm,short_qa --profile quick
    kvgate run --target http://127.0.0.1:8000 --model my-model --tenants me=sk-123   # any server
    kvgate run --target URL --rate 4 --arrivals poisson --duration 60   # open loop: chat at 4 requests/s
    kvgate run --target URL --trace conversation_trace.jsonl --rate-scale 0.5 --limit 200   # a trace, live
    kvgate run --target GATEWAY --replica http://a:8000 --replica http://b:8000,kv-events=tcp://b:5557   # a fleet
    kvgate run --target URL --rate 20 --processes 2                   # two locust worker processes here
    kvgate run --target URL --rate 20 --master-bind 10.0.0.5:5557 --expect-workers 2   # workers elsewhere:
    kvgate worker --master 10.0.0.5:5557                              # ... on each of their hosts

Without --target the reference engine is started with --policy (and stopped afterwards, also on
Ctrl-C or failure). Then: preflight, baseline, load (locust, headless), cooldown, the run
record under --out (default runs/<timestamp>-<policy>/), the gates (verdict.json, JUnit XML,
a table), report.html. Exit codes: 0 every measurable gate passed, 1 a gate failed (or a
--require'd gate was not measurable), 2 a harness error (preflight failed, the engine did not
start, workers that never came, nothing measurable, most gates not measurable without
--allow-partial, ...). docs/scenarios.md explains the scenarios, profiles and settings;
docs/load.md the open-loop options (--rate, --trace), which replace the scenarios' users by
arrivals on a schedule, and how locust workers on other hosts carry any load; docs/targets.md a
fleet behind a gateway (--replica, each replica read and judged on its own).
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from gates import load_thresholds
from harness.collectors.isolation import EXTRA_PROBES, ProbeOptions
from harness.collectors.llamacpp_slots import DEFAULT_LAYOUT, KvLayout
from harness.collectors.replica_spec import ReplicaSpec, parse_replicas
from harness.commands.gate import add_partial_argument, names
from harness.judge import judge
from harness.live_run import LivePlan, run_live
from harness.loadgen.arrivals import ArrivalKind
from harness.loadgen.client_lag import MAX_LAG_P99_MS
from harness.loadgen.outcome import Status
from harness.loadgen.prompts import DEFAULT_SYSTEM_PROMPT
from harness.loadgen.settings import LoadSettings, SettingsError, env_fields
from harness.loadgen.tenants import TenantSpecError, format_tenants, parse_tenants, tenants_of_config
from harness.loadgen.workloads import workload_of
from harness.locust_process import Master
from harness.profiles import PROFILES, format_overrides, get_profile, request_timeout
from harness.regression import add_against_argument
from harness.replay.loaders import AUTO, LOADERS
from harness.scenario_catalog import scenarios_dir, select
from record.baseline_store import find_runs
from record.errors import KvgateError
from record.fleet import replica_summary
from record.run_record import Pressure, RunRecord
from reference_engine import EngineConfig, load_config, with_overrides
from reports.prefix_reuse import cache_warning, reuse_line
from reports.pressure import missing_rungs_warning, pressure_line
from reports.sections.replicas import SUMMARY_ROWS, summary_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="drive a target with the scenarios, record the run, evaluate the gates")
    p.add_argument(
        "--policy",
        type=Path,
        metavar="CONFIG",
        help="engine/policy config (TOML): the reference engine is started with it unless --target is "
        "given (then it supplies tenants, keys and model; --label-policy names the run after it)",
    )
    add_load_arguments(p)
    p.add_argument("--target", metavar="URL", help="an already running OpenAI-compatible server (its root URL)")
    p.add_argument(
        "--tokenizer",
        type=Path,
        metavar="FILE",
        help="with --target: a tokenizer.json (tokenizers) that counts the target's prompt tokens when "
        "it has no /tokenize (vLLM and llama.cpp have one)",
    )
    p.add_argument(
        "--fixed-profile",
        action="store_true",
        help="with --target: run the profile's sizes as they are, not sized to the target's measured speed",
    )
    p.add_argument(
        "--label-policy",
        action="store_true",
        help="with --target: record the --policy config's name and digest as what the target runs "
        "(a label; its watermarks, pool and caps are never judged against)",
    )
    p.add_argument(
        "--metrics-url", metavar="URL", help="its Prometheus metrics (default: <target>/metrics; '' for none)"
    )
    p.add_argument(
        "--kv-events",
        metavar="ENDPOINT",
        default="",
        help="vLLM's KV cache events: tcp://HOST:PORT to connect to a server whose --kv-events-config "
        "endpoint is tcp://*:PORT, listen:tcp://127.0.0.1:PORT for one that connects there",
    )
    p.add_argument(
        "--llamacpp-kv",
        type=KvLayout,
        choices=list(KvLayout),
        metavar="{unified,split}",
        default=DEFAULT_LAYOUT,
        help="how a llama.cpp target laid out its KV cache, which /slots does not say: unified (its default "
        "without -np, or --kv-unified) or split (-np N without --kv-unified); usage is read over it",
    )
    p.add_argument(
        "--target-log",
        type=Path,
        metavar="FILE",
        help="the server's log, read during the run for out-of-memory lines (an OOM witness; only the "
        "pattern's name and time are recorded, never the line)",
    )
    p.add_argument(
        "--replica",
        metavar="URL[,OPTION=VALUE]",
        action="append",
        default=[],
        help="with --target (a gateway): one replica behind it, read on its own; repeat for each. "
        "Options: metrics=URL (default URL/metrics), kv-events=ENDPOINT (as --kv-events), log=FILE "
        "(as --target-log), name=NAME (default host:port). Its gates judge each replica and the fleet",
    )
    p.add_argument(
        "--tenant-caps",
        metavar="SPEC",
        help="with --target: the KV share each tenant is held to, FRACTION for all or name=FRACTION,... "
        "(tenant_share judges the client's estimate of each tenant's share against it)",
    )
    p.add_argument("--model", metavar="NAME", help="model name (default: the config's, else the first of /v1/models)")
    p.add_argument("--tenants", metavar="SPEC", help="name=key[:class],... (default: the config's tenants)")
    p.add_argument("--out", type=Path, metavar="DIR", help="run record directory (default runs/<timestamp>-<policy>)")
    load = p.add_argument_group("open-loop load (instead of locust's users; docs/load.md)")
    which = load.add_mutually_exclusive_group()
    which.add_argument(
        "--rate",
        type=positive(float),
        metavar="R",
        help="send chat requests (short_qa's) at R per second on average, on the --arrivals schedule",
    )
    which.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="send a request trace (Mooncake JSONL, Azure 2023 or BurstGPT CSV) at its own times",
    )
    load.add_argument("--trace-format", default=AUTO, choices=[AUTO, *LOADERS], help="trace format (default: auto)")
    load.add_argument(
        "--rate-scale",
        type=positive(float),
        default=1.0,
        metavar="X",
        help="--trace: multiply its arrival rate by X (arrival times divided by X)",
    )
    load.add_argument(
        "--time-scale",
        type=positive(float),
        default=1.0,
        metavar="X",
        help="--trace: stretch its time axis by X (arrival times multiplied by X)",
    )
    load.add_argument(
        "--size-scale",
        type=positive(float),
        default=1.0,
        metavar="X",
        help="--trace: multiply every prompt and output length and the prefix block size by X (a trace's "
        "shape on a small server)",
    )
    load.add_argument(
        "--limit", type=positive(int), metavar="N", help="send at most N requests (--duration bounds them too)"
    )
    add_arrival_arguments(load)
    add_master_arguments(p)
    p.add_argument(
        "--require",
        metavar="NAMES",
        type=names,
        action="extend",
        default=[],
        help="comma-separated gates that must be measurable (not measurable = fail), as kvgate gate",
    )
    p.add_argument(
        "--probes",
        metavar="NAMES",
        type=names,
        action="extend",
        default=[],
        help=f"isolation probes beyond the cached-token pair ({','.join(EXTRA_PROBES)}): tiers repeats it "
        "after pushing the prompt down to each KV tier; timing times cold and warm prompts (prefix_timing)",
    )
    add_partial_argument(p)
    p.set_defaults(func=run)


def run_arguments(**given: object) -> argparse.Namespace:
    """`kvgate run`'s options at their defaults, overridden by `given`: how `kvgate matrix` and
    `kvgate sweep` make each run's plan, so an option added to `kvgate run` reaches them at its
    default instead of as a missing attribute."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return argparse.Namespace(**{**vars(parser.parse_args(["run"])), **given})


def add_arrival_arguments(p: argparse._ActionsContainer) -> None:
    """How an open-loop load is timed and bounded: shared by `kvgate run` and `kvgate sweep`."""
    p.add_argument(
        "--arrivals",
        choices=[k.value for k in ArrivalKind],
        default=ArrivalKind.POISSON.value,
        help="arrival schedule at the rate (default: poisson)",
    )
    p.add_argument(
        "--burst-size", type=positive(int), default=8, metavar="N", help="--arrivals bursts: requests per burst"
    )
    p.add_argument("--seed", type=at_least_zero, default=0, metavar="N", help="seed of the arrival schedule")
    p.add_argument(
        "--max-lag-ms",
        type=positive(float),
        default=MAX_LAG_P99_MS,
        metavar="MS",
        help=f"P99 client lag beyond which the run is a harness error, not a verdict (default {MAX_LAG_P99_MS:.0f})",
    )
    default_in_flight = LoadSettings().max_in_flight
    p.add_argument(
        "--max-in-flight",
        type=positive(int),
        default=default_in_flight,
        metavar="N",
        help=f"requests each locust process holds open at once; more wait, and show as lag (default "
        f"{default_in_flight})",
    )


def add_processes_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--processes",
        type=at_least_zero,
        default=0,
        metavar="N",
        help="locust worker processes on this host (locust --processes; 0: one process)",
    )


def add_master_arguments(p: argparse.ArgumentParser) -> None:
    """Locust workers on other hosts: shared by `kvgate run` and `kvgate sweep` (docs/load.md)."""
    group = p.add_argument_group("locust workers on other hosts (kvgate worker --master HOST:PORT there)")
    group.add_argument(
        "--master-bind",
        type=host_port,
        metavar="HOST:PORT",
        help="run locust's master bound here, for workers on other hosts to connect to (instead of --processes)",
    )
    group.add_argument(
        "--expect-workers", type=positive(int), metavar="N", help="with --master-bind: start once N workers are in"
    )
    group.add_argument(
        "--workers-wait",
        type=positive(float),
        default=60.0,
        metavar="S",
        help="with --master-bind: wait this long for them, then give up (exit 2; default 60)",
    )


def host_port(text: str) -> tuple[str, int]:
    """An argparse type: HOST:PORT (an IPv6 host in brackets, [::1]:5557)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 10.0.0.5:5557, got {text!r}")
    return host.strip("[]"), int(port)


def open_loop_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of the open-loop load `kvgate run`'s options ask for (none: locust's users)."""
    if args.trace is not None:
        return {
            **_client_settings(args),
            "trace": str(args.trace),
            "trace_format": args.trace_format,
            "rate_scale": args.rate_scale,
            "time_scale": args.time_scale,
            "size_scale": args.size_scale,
            "max_requests": args.limit or 0,
        }
    return chat_settings(args, args.rate, args.limit) if args.rate is not None else {}


def chat_settings(args: argparse.Namespace, rate_per_s: float, max_requests: int | None = None) -> dict[str, Any]:
    """Chat at `rate_per_s` on the schedule `add_arrival_arguments` asked for."""
    return {
        **_client_settings(args),
        "rate": rate_per_s,
        "arrivals": args.arrivals,
        "arrival_burst_size": args.burst_size,
        "arrival_seed": args.seed,
        "max_requests": max_requests or 0,
    }


def _client_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"max_lag_ms": args.max_lag_ms, "max_in_flight": args.max_in_flight}


def master_of(args: argparse.Namespace) -> Master | None:
    """--master-bind and --expect-workers, checked together."""
    if args.master_bind is None:
        if args.expect_workers is not None:
            raise KvgateError("--expect-workers is for --master-bind: workers on other hosts connect to that master")
        return None
    if args.expect_workers is None:
        raise KvgateError("--master-bind needs --expect-workers N: how many workers to wait for")
    if args.processes:
        raise KvgateError("--processes starts workers here, --master-bind waits for workers elsewhere: pick one")
    host, port = args.master_bind
    return Master(host, port, args.expect_workers, args.workers_wait)


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    """The options that say how to load a target: shared by `kvgate run` and `kvgate matrix`."""
    p.add_argument(
        "--scenarios",
        type=names,
        default=[],
        metavar="A,B",
        help="comma-separated scenario names (default: all of scenarios/, the mixed default)",
    )
    p.add_argument(
        "--profile",
        choices=list(PROFILES),
        default="ci",
        help="duration, users and sizes: quick (< 1 min), ci (default), full",
    )
    p.add_argument("--duration", type=positive(float), metavar="S", help="seconds of load (default: the profile's)")
    p.add_argument("--users", type=positive(int), metavar="N", help="locust users (default: the profile's)")
    p.add_argument(
        "--spawn-rate", type=positive(float), metavar="R", help="users started per second (default: the profile's)"
    )
    p.add_argument(
        "--workers",
        type=at_least_zero,
        default=0,
        metavar="N",
        help="engine worker processes behind a router (kvgate serve --workers; worker_kill needs >= 2)",
    )
    add_processes_argument(p)
    p.add_argument(
        "--request-timeout",
        type=positive(float),
        metavar="S",
        help="seconds a request may take before it is a timeout (default: the profile's; never more "
        "than the load plus its stop timeout, so a hang ends as a timeout within the run)",
    )
    p.add_argument(
        "--gates",
        type=Path,
        metavar="FILE",
        help="thresholds TOML overriding gates/thresholds.toml (read before the load starts)",
    )
    add_against_argument(p)
    p.add_argument(
        "--sample-interval",
        type=positive(float),
        metavar="S",
        help="seconds between samples (default: the config's server.sample_interval_s, else 0.5)",
    )
    p.add_argument("--scenarios-dir", type=Path, default=None, metavar="DIR", help="where the locustfiles are")


def positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse type: a number of `kind` above zero (`--users 0` is a mistake, not a default)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}"
            ) from None
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def at_least_zero(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, got {text!r}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)  # CI cancels with SIGTERM: clean up as for Ctrl-C
    console = Console()
    find_runs(args.against)  # a store that is not there fails now, not after the load
    plan = build_plan(args)
    console.print(
        f"[bold]kvgate run[/] {plan.run_dir} — policy {_policy(_named(plan.config, args))}, "
        f"scenarios {', '.join(plan.scenario_names())}, profile {plan.profile}"
    )
    if plan.engine_overrides:
        console.print(f"  the {plan.profile} profile sets {format_overrides(plan.engine_overrides)}")
    with RichProgress(console) as progress:
        result = run_live(plan, progress)
    console.print(f"run record: [bold]{result.run_dir}[/]")
    judgement = judge(
        result.run_dir, args.gates, require=args.require, allow_partial=args.allow_partial, against=args.against
    )
    print_pressure(console, judgement.record.meta.pressure)
    print_fleet(console, judgement.record)
    console.print(f"verdict: {judgement.record.dir / 'verdict.json'}  report: [bold]{judgement.report}[/]")
    return judgement.exit_code


def print_pressure(console: Console, pressure: Pressure | None) -> None:
    """How far up the watermark ladder the run went, under its verdict; in bold red when it never
    reached the rungs where the policy decides (then its PASS says nothing about them)."""
    console.print(pressure_line(pressure), markup=False, highlight=False)
    if warning := missing_rungs_warning(pressure):
        console.print(warning, style="bold red", markup=False, highlight=False)


def print_fleet(console: Console, record: RunRecord) -> None:
    """Behind a gateway, the replicas side by side; the run's prefix hits beside the workload's
    bound, in bold red when the cache was not exercised (reports/prefix_reuse.py words both)."""
    summary = replica_summary(record)
    if not summary.empty:
        table = Table("replica", *(label for _, label in SUMMARY_ROWS), title="replicas side by side")
        for row in summary.to_dict("records"):
            table.add_row(str(row["replica"]), *(summary_text(row[key], key) for key, _ in SUMMARY_ROWS))
        console.print(table)
    if line := reuse_line(record):
        console.print(line, markup=False, highlight=False)
    if warning := cache_warning(record):
        console.print(warning, style="bold red", markup=False, highlight=False)


def raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _policy(config: EngineConfig | None) -> str:
    return config.kv_cache.policy.value if config is not None else "external"


def _named(config: EngineConfig | None, args: argparse.Namespace) -> EngineConfig | None:
    """The config a run is named for: on an external target only with --label-policy."""
    return config if args.target is None or args.label_policy else None


def build_plan(args: argparse.Namespace) -> LivePlan:
    if args.policy is None and args.target is None:
        raise KvgateError("kvgate run needs --policy CONFIG (start the reference engine) or --target URL")
    config = load_config(args.policy) if args.policy is not None else None
    load_thresholds(args.gates)  # a typo in the thresholds is found now, not after the whole load
    profile = get_profile(args.profile)
    # A profile sizes the simulated GPU for its load (engine_overrides); an external --target
    # runs what it runs, so nothing is changed there: the config only names it.
    overrides = dict(profile.engine_overrides) if config is not None and args.target is None else {}
    if config is not None and overrides:
        config = with_overrides(config, overrides)
    try:
        settings = _settings(args, config, profile.settings).with_(**open_loop_settings(args))
    except (SettingsError, TenantSpecError) as err:
        raise KvgateError(str(err)) from None
    open_loop = workload_of(settings)
    if open_loop is not None and args.scenarios:
        raise KvgateError("--scenarios picks locust scenarios; --rate and --trace send an open-loop load instead")
    duration_s, stop_timeout_s = args.duration or profile.duration_s, profile.stop_timeout_s
    settings = settings.with_(
        request_timeout_s=request_timeout(
            args.request_timeout or settings.request_timeout_s, duration_s, stop_timeout_s
        )
    )
    directory = args.scenarios_dir or scenarios_dir()
    scenarios = select(directory, args.scenarios) if open_loop is None else []
    replicas = _replicas(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = args.out or _unique(Path("runs") / f"{stamp}-{_policy(_named(config, args))}")
    sample_interval = args.sample_interval or (config.server.sample_interval_s if config is not None else 0.5)
    return LivePlan(
        run_dir=run_dir,
        config=config,
        config_path=args.policy,
        scenarios=scenarios,
        mixed_dir=None if args.scenarios or open_loop else directory,
        settings=settings,
        duration_s=duration_s,
        users=args.users or profile.users,
        spawn_rate=args.spawn_rate or profile.spawn_rate,
        processes=args.processes,
        master=master_of(args),
        engine_workers=args.workers,
        target_url=args.target,
        metrics_url="" if replicas else args.metrics_url,
        baseline_requests=profile.baseline_requests,
        cooldown_max_s=profile.cooldown_max_s,
        cooldown_min_s=profile.cooldown_min_s,
        stop_timeout_s=stop_timeout_s,
        sample_interval_s=sample_interval,
        profile=profile.name,
        engine_overrides=overrides,
        open_loop=open_loop,
        kv_events_endpoint=args.kv_events,
        llamacpp_kv=args.llamacpp_kv,
        target_log=args.target_log,
        replicas=replicas,
        tenant_caps=_tenant_caps(args, settings.tenants),
        label_policy=args.target is not None and args.label_policy,
        tokenizer=args.tokenizer if args.target is not None else None,
        size_to_target=args.target is not None and open_loop is None and not args.fixed_profile,
        explicit=explicit_choices(args, os.environ),
        probes=_probes(args.probes),
    )


def _probes(chosen: list[str]) -> ProbeOptions:
    unknown = sorted(set(chosen) - set(EXTRA_PROBES))
    if unknown:
        raise KvgateError(f"--probes: unknown {', '.join(unknown)} (choose from {', '.join(EXTRA_PROBES)})")
    return ProbeOptions.named(chosen)


def _replicas(args: argparse.Namespace) -> tuple[ReplicaSpec, ...]:
    """--replica, each: behind a --target gateway, which is then not read itself (it holds no
    KV), so the single target's --metrics-url, --kv-events and --target-log have no place."""
    if not args.replica:
        return ()
    if args.target is None:
        raise KvgateError("--replica names a replica behind a --target gateway: give --target URL too")
    given = [
        f"--{name}"
        for name, value in (
            ("metrics-url", args.metrics_url),
            ("kv-events", args.kv_events),
            ("target-log", args.target_log),
        )
        if value
    ]
    if given:
        raise KvgateError(
            f"{', '.join(given)} read a single target; behind a gateway each replica has its own: "
            f"--replica URL,metrics=URL,kv-events=ENDPOINT,log=FILE"
        )
    return parse_replicas(args.replica)


def _tenant_caps(args: argparse.Namespace, tenants_spec: str) -> dict[str, float]:
    """--tenant-caps: `0.4` (every tenant of the run) or `acme=0.3,globex=0.5`."""
    if not args.tenant_caps:
        return {}
    if args.target is None:
        raise KvgateError("--tenant-caps is for --target runs: the reference engine's caps are its config's")
    names = [t.name for t in parse_tenants(tenants_spec)]
    caps: dict[str, float] = {}
    for item in (part.strip() for part in args.tenant_caps.split(",")):
        name, sep, value = item.rpartition("=")
        for tenant in [name.strip()] if sep else names:
            caps[tenant] = _share(value, item)
    return caps


def _share(text: str, item: str) -> float:
    try:
        share = float(text)
    except ValueError:
        share = math.nan
    if not 0 < share <= 1:
        raise KvgateError(f"--tenant-caps: {item!r} is not FRACTION or name=FRACTION with 0 < FRACTION <= 1")
    return share


def explicit_choices(args: argparse.Namespace, environ: Mapping[str, str]) -> frozenset[str]:
    """What the user chose, which sizing to a target's speed never changes: `--duration`,
    `--users`, `--request-timeout`, and every setting given as a KVGATE_* variable."""
    given = {"duration_s": args.duration, "users": args.users, "request_timeout_s": args.request_timeout}
    return frozenset({name for name, value in given.items() if value is not None} | env_fields(environ))


def _settings(args: argparse.Namespace, config: EngineConfig | None, profile: Mapping[str, object]) -> LoadSettings:
    """Profile, then what the config says (tenants, admin key, public prefix, model), then
    KVGATE_* variables, then the command line. An engine this run starts gets a fresh random
    admin key (unless KVGATE_ADMIN_KEY names one): no key of the config, and no public default."""
    settings = LoadSettings(**profile)  # type: ignore[arg-type]
    if config is not None:
        prefixes = config.prefix_cache.public_prefixes
        admin_key = secrets.token_urlsafe(24) if args.target is None else config.server.admin_key
        settings = settings.with_(
            tenants=format_tenants(tenants_of_config(config)) or settings.tenants,
            admin_key=admin_key or settings.admin_key,
            system_prompt=prefixes[0].text if prefixes else DEFAULT_SYSTEM_PROMPT,
            model=config.server.served_model_name or config.model.name,
        )
    settings = settings.with_env(os.environ)
    if args.model:
        settings = settings.with_(model=args.model)
    if args.tenants:
        settings = settings.with_(tenants=args.tenants)
    return settings


def _unique(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        candidate, n = path.with_name(f"{path.name}-{n}"), n + 1
    return candidate


class RichProgress:
    """The run's progress on the terminal: one line per phase, a bar during the load. Without
    a terminal (CI logs) only the phase lines are printed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self._task: TaskID | None = None
        self._phase = ""
        self._since = time.monotonic()

    def __enter__(self) -> RichProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_phase()
        self._progress.__exit__(None, None, None)

    def phase(self, name: str, detail: str = "") -> None:
        self._close_phase()
        self._phase, self._since = name, time.monotonic()
        self.console.print(f"  {name}: {detail}" if detail else f"  {name}")
        self._task = self._progress.add_task(name, total=None, detail=detail)

    def load(self, elapsed_s: float, total_s: float, counts: Mapping[str, int], usage: float | None) -> None:
        if self._task is None:
            return
        statuses = tuple(status.value for status in Status)
        parts = [f"{sum(counts.get(k, 0) for k in statuses)} requests"]
        parts += [f"{k} {counts[k]}" for k in (*statuses, "429") if counts.get(k)]
        if usage is not None:
            parts.append(f"KV {usage:.0%}")
        self._progress.update(self._task, total=total_s, completed=min(elapsed_s, total_s), detail=" · ".join(parts))

    def _close_phase(self) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
            self.console.print(f"  {self._phase} done ({time.monotonic() - self._since:.1f} s)", style="dim")
            self._task = None
